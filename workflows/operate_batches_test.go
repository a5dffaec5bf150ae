package workflows

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

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

// eagerRecorder records, per activity type, whether each activity a
// workflow scheduled asked to start eagerly.
type eagerRecorder struct {
	interceptor.WorkerInterceptorBase
	mu    sync.Mutex
	eager map[string][]bool
}

func (r *eagerRecorder) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &eagerInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, r: r}
}

type eagerInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	r *eagerRecorder
}

func (i *eagerInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&eagerOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, r: i.r})
}

type eagerOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	r *eagerRecorder
}

func (o *eagerOutbound) ExecuteActivity(ctx workflow.Context, name string, args ...any) workflow.Future {
	o.r.mu.Lock()
	o.r.eager[name] = append(o.r.eager[name], !workflow.GetActivityOptions(ctx).DisableEagerExecution)
	o.r.mu.Unlock()
	return o.Next.ExecuteActivity(ctx, name, args...)
}

// TestBatchesAreNeverStartedEagerly: a task's batch activities, status and
// delivered ops alike, go through the task queue, never eagerly in the
// reply to the task's workflow task: a reply a loaded server sends after
// the worker gave up on it loses an eager activity, and its hosts wait
// out the batch's heartbeat timeout.
func TestBatchesAreNeverStartedEagerly(t *testing.T) {
	for _, tc := range []struct {
		op       proc.OpType
		activity string
		batch    int
	}{
		{proc.OpStatus, StatusActivity, policies.StatusBatch},
		{proc.OpStart, DeliverActivity, policies.DeliverBatch},
	} {
		t.Run(tc.activity, func(t *testing.T) {
			env := operateEnv(t)
			rec := &eagerRecorder{eager: map[string][]bool{}}
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec}})
			var items []proc.Item
			for i := 0; i < 2*tc.batch+1; i++ {
				items = append(items, proc.Item{Target: proc.Target{IP: fmt.Sprintf("10.1.%d.%d", i/200, i%200+1)},
					Process: proc.ProcessID{Namespace: "ns", Name: "p"}})
			}
			env.RegisterActivityWithOptions(func(in StatusInput) ([]HostReply, error) {
				out := make([]HostReply, len(in.Items))
				for i := range in.Items {
					out[i] = HostReply{Index: in.Offset + i, Result: proc.HostResult{Code: proc.CodeSuccess}}
				}
				return out, nil
			}, activity.RegisterOptions{Name: StatusActivity})
			env.RegisterActivityWithOptions(func(in DeliverInput) ([]HostReply, error) { return answerAll(in), nil },
				activity.RegisterOptions{Name: DeliverActivity})
			env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:T", Op: tc.op, Items: items})
			var res OperateResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.Done != len(items) {
				t.Fatalf("done %d of %d", res.Done, len(items))
			}
			asked := rec.eager[tc.activity]
			if len(asked) < 3 {
				t.Fatalf("%d %s batches scheduled, want at least 3", len(asked), tc.activity)
			}
			for i, eager := range asked {
				if eager {
					t.Errorf("%s batch %d asked to start eagerly", tc.activity, i)
				}
			}
		})
	}
}
