package workflows

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// TestBatchAnsweredBySignalIsDone: a batch whose every item is answered by
// its AnswersSignal is done, though its activity's completion never comes
// (a loaded server lost it): the task ends with those answers, on status
// and on delivered ops alike, without waiting for the heartbeat timeout
// that would have the activity run again.
func TestBatchAnsweredBySignalIsDone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		op       proc.OpType
		activity string
		batch    int
	}{
		{"status", proc.OpStatus, StatusActivity, policies.StatusBatch},
		{"start", proc.OpStart, DeliverActivity, policies.DeliverBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := operateEnv(t)
			var items []proc.Item
			for i := 0; i < tc.batch+3; i++ {
				items = append(items, proc.Item{Target: proc.Target{IP: fmt.Sprintf("10.0.%d.%d", i/200, i%200+1)},
					Process: proc.ProcessID{Namespace: "ns", Name: "p"}})
			}
			answer := proc.HostResult{Code: proc.CodeSuccess, Message: "answered by signal"}
			// Each batch signals its answers, then its activity hangs
			// until the task no longer waits on it.
			hang := func(ctx context.Context, idx []int) ([]HostReply, error) {
				replies := make([]HostReply, len(idx))
				for i, g := range idx {
					replies[i] = HostReply{Index: g, Result: answer}
				}
				env.SignalWorkflow(AnswersSignal, replies)
				<-ctx.Done()
				return nil, ctx.Err()
			}
			switch tc.activity {
			case StatusActivity:
				env.RegisterActivityWithOptions(func(ctx context.Context, in StatusInput) ([]HostReply, error) {
					return hang(ctx, span(in.Offset, in.Offset+len(in.Items)))
				}, activity.RegisterOptions{Name: StatusActivity})
			default:
				env.RegisterActivityWithOptions(func(ctx context.Context, in DeliverInput) ([]HostReply, error) {
					return hang(ctx, in.Indexes)
				}, activity.RegisterOptions{Name: DeliverActivity})
			}
			env.SetTestTimeout(30 * time.Second)
			env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:T", Op: tc.op, Items: items})
			var res OperateResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.Done != len(items) || res.Failed != 0 {
				t.Fatalf("done %d, failed %d of %d", res.Done, res.Failed, len(items))
			}
			for _, r := range res.Results {
				if r.Message != answer.Message {
					t.Fatalf("%s: %d %q, want its signalled answer", r.Key, r.Code, r.Message)
				}
			}
		})
	}
}
