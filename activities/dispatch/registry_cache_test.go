package dispatch

import (
	"context"
	"sync/atomic"
	"testing"

	"go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// betweenRuns stands in for a loaded server and a host that had just
// continued as new when its batch listed it: the first listing misses the
// host, its registry query times out (its worker is busy), and a later
// listing shows the new run with its memo.
type betweenRuns struct {
	client.Client
	host    proc.HostID
	entries []workflows.RegistryEntry
	lists   atomic.Int32
	queries atomic.Int32
}

func (s *betweenRuns) ListWorkflow(_ context.Context, _ *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	if s.lists.Add(1) == 1 {
		return &workflowservice.ListWorkflowExecutionsResponse{}, nil
	}
	memo, err := converter.GetDefaultDataConverter().ToPayload(s.entries)
	if err != nil {
		return nil, err
	}
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{{
		Execution: &common.WorkflowExecution{WorkflowId: workflows.HostWorkflowID(s.host)},
		Memo:      &common.Memo{Fields: map[string]*common.Payload{workflows.SpecsMemo: memo}},
	}}}, nil
}

func (s *betweenRuns) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Status: enums.WORKFLOW_EXECUTION_STATUS_RUNNING}}, nil
}

func (s *betweenRuns) QueryWorkflowWithOptions(context.Context, *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	s.queries.Add(1)
	return nil, serviceerror.NewDeadlineExceeded("query timed out")
}

// TestRegistryReadListsAHostAgainWhenItsQueryTimesOut: a host the batch's
// listing missed, whose query the engine does not answer in time, is read
// from a second listing of it, not answered 9199 (at 10,000 identities one
// host was, after three timed-out queries).
func TestRegistryReadListsAHostAgainWhenItsQueryTimesOut(t *testing.T) {
	h := proc.HostID{IP: "10.0.0.1"}
	p := proc.ProcessID{Namespace: "ns", Name: "svc"}
	c := &betweenRuns{host: h, entries: []workflows.RegistryEntry{{Process: p, Spec: proc.Spec{ProcName: "svc"}}}}
	rc := newRegistryCache(context.Background(), c, newRegistryLister(c, nil), []proc.HostID{h})
	entries, err := rc.get(context.Background(), h, p)
	if err != nil || len(entries) != 1 || entries[0].Process != p || entries[0].Spec.ProcName != "svc" {
		t.Fatalf("get = %+v, %v; want the registry from the second listing", entries, err)
	}
	if q, l := c.queries.Load(), c.lists.Load(); q != 1 || l != 2 {
		t.Errorf("%d queries and %d listings; want the one timed-out query, then one more listing", q, l)
	}
}
