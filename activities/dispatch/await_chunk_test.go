package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// failingPolls stands in for a loaded server that fails a chunk's long
// poll a few times before the chunk's result reaches it.
type failingPolls struct {
	client.Client
	fails, polls int
	// unanswered polls are never answered: the server missed the close.
	unanswered int
	result     workflows.OperateResult
}

func (s *failingPolls) GetWorkflow(context.Context, string, string) client.WorkflowRun {
	s.polls++
	return chunkRun{s: s}
}

func (s *failingPolls) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Status: enums.WORKFLOW_EXECUTION_STATUS_RUNNING}}, nil
}

type chunkRun struct {
	client.WorkflowRun
	s *failingPolls
}

func (r chunkRun) Get(ctx context.Context, out any) error {
	if r.s.polls <= r.s.unanswered {
		<-ctx.Done()
		return ctx.Err()
	}
	if r.s.polls <= r.s.unanswered+r.s.fails {
		return errors.New("context canceled")
	}
	*out.(*workflows.OperateResult) = r.s.result
	return nil
}

// TestAwaitChunkWaitsAgainOnAFailedPoll: a long poll the server fails
// while the chunk runs does not end the wait (its retry would come only
// after a growing backoff, with the task idle after its chunk closed); the
// wait reads the chunk's counts once it closes.
func TestAwaitChunkWaitsAgainOnAFailedPoll(t *testing.T) {
	defer func(d time.Duration) { awaitAgainAfter = d }(awaitAgainAfter)
	awaitAgainAfter = 10 * time.Millisecond
	s := &failingPolls{fails: 2, result: workflows.OperateResult{Done: 2, Results: []workflows.KeyedResult{
		{Key: "a", HostResult: proc.HostResult{Code: proc.CodeSuccess}},
		{Key: "b", HostResult: proc.HostResult{Code: proc.CodeCommandFailed}},
	}}}
	d := &Dispatcher{Client: s}
	got, err := d.AwaitChunk(context.Background(), workflows.AwaitChunkInput{ID: "T/chunk-0", Total: 2})
	if err != nil {
		t.Fatalf("the wait failed with the server's poll: %v", err)
	}
	if s.polls != 3 || !got.Finished || got.Done != 2 || got.Failed != 1 {
		t.Fatalf("want the chunk's counts after three polls; got %+v after %d", got, s.polls)
	}
}

// TestAwaitChunkPollsAgainWhenAPollGoesUnanswered: a long poll the server
// never tells of the chunk's close ends at the wait's own bound, and the
// next poll reads the closed chunk.
func TestAwaitChunkPollsAgainWhenAPollGoesUnanswered(t *testing.T) {
	defer func(d time.Duration) { awaitPollFor = d }(awaitPollFor)
	awaitPollFor = 50 * time.Millisecond
	s := &failingPolls{unanswered: 1, result: workflows.OperateResult{Done: 1, Results: []workflows.KeyedResult{
		{Key: "a", HostResult: proc.HostResult{Code: proc.CodeSuccess}},
	}}}
	d := &Dispatcher{Client: s}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := d.AwaitChunk(ctx, workflows.AwaitChunkInput{ID: "T/chunk-0", Total: 1})
	if err != nil || s.polls != 2 || !got.Finished || got.Done != 1 {
		t.Fatalf("want the chunk's counts from a second poll; got %+v, %v after %d polls", got, err, s.polls)
	}
}
