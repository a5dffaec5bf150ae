package workflows

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

func operateEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Operate, workflow.RegisterOptions{Name: OperateWorkflowName})
	return env
}

// TestLargeStatusSplitsIntoChunks: a status task of more than ChunkSize
// items runs as chunk children, so no one result holds every host's
// content, and the task records its outcome from the chunks' results.
func TestLargeStatusSplitsIntoChunks(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Operate, workflow.RegisterOptions{Name: OperateWorkflowName})
	n := policies.ChunkSize + 7
	items := make([]proc.Item, n)
	for i := range items {
		items[i] = proc.Item{Target: proc.Target{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250)}, Process: proc.ProcessID{Namespace: "ns", Name: "p"}}
	}
	// The status batches answer every host 0, except the last host, 829.
	var probed atomic.Int64 // batches run concurrently
	env.RegisterActivityWithOptions(func(_ context.Context, in StatusInput) ([]HostReply, error) {
		out := make([]HostReply, len(in.Items))
		for i := range in.Items {
			out[i] = HostReply{Index: in.Offset + i, Result: proc.HostResult{Code: proc.CodeSuccess, Message: "success"}}
			if in.Offset+i == n-1 {
				out[i].Result = proc.HostResult{Code: proc.CodeNotRunning, Message: "process(p) is not running"}
			}
		}
		probed.Add(int64(len(in.Items)))
		return out, nil
	}, activity.RegisterOptions{Name: "Status"})
	var outcome string
	var failed int64
	upserts := 0
	env.OnUpsertTypedSearchAttributes(mock.Anything).Return(nil).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		outcome, _ = sa.GetKeyword(SAOutcome)
		failed, _ = sa.GetInt64(SAFailedHost)
		upserts++
	})
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:1", Op: proc.OpStatus, Items: items, Indexed: true})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Chunks) != 2 || len(res.Results) != 0 || res.Done != n || probed.Load() != int64(n) {
		t.Fatalf("chunks %v, %d results in the parent, done %d of %d, probed %d", res.Chunks, len(res.Results), res.Done, n, probed.Load())
	}
	// Only the parent records the outcome: its chunks are not indexed.
	if upserts != 1 || outcome != OutcomeFailed || failed != 1 {
		t.Fatalf("outcome %q failed %d after %d upserts; want %q, 1, once", outcome, failed, upserts, OutcomeFailed)
	}
}
