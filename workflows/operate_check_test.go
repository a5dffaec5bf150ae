package workflows

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// TestCheckTaskRunsInCheckBatches: a host check task runs its hosts in
// batches of StatusBatch, each one Check activity, and never hands an
// item to a host workflow (no Dispatch activity is registered: a task
// that asked for one would fail).
func TestCheckTaskRunsInCheckBatches(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Operate, workflow.RegisterOptions{Name: OperateWorkflowName})
	n := policies.StatusBatch + 20
	items := make([]proc.Item, n)
	for i := range items {
		items[i] = proc.Item{Target: proc.Target{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)}}
	}
	var batches atomic.Int64
	env.RegisterActivityWithOptions(func(_ context.Context, in StatusInput) ([]HostReply, error) {
		batches.Add(1)
		out := make([]HostReply, len(in.Items))
		for i := range in.Items {
			out[i] = HostReply{Index: in.Offset + i, Result: proc.HostResult{Code: proc.CodeSuccess, Message: "passed"}}
			if in.Offset+i == 3 {
				out[i].Result = proc.Fail(proc.CodeUnreachable, "host unreachable")
			}
		}
		return out, nil
	}, activity.RegisterOptions{Name: "Check"})
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:1", Op: proc.OpCheck, Items: items})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Done != n || len(res.Results) != n || res.Failed != 1 || batches.Load() != 2 {
		t.Fatalf("done %d, %d results, %d failed after %d batches; want %d, %d, 1, 2", res.Done, len(res.Results), res.Failed, batches.Load(), n, n)
	}
	if r := res.Results[3]; r.Code != proc.CodeUnreachable || r.Key != proc.ResultKey(items[3].Target, proc.ProcessID{}) {
		t.Fatalf("host 3: %+v", r)
	}
}
