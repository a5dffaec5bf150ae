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
	result       workflows.OperateResult
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

func (r chunkRun) Get(_ context.Context, out any) error {
	if r.s.polls <= r.s.fails {
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
