package workflows

// Tests of tasks begun before VersionDeliverUpdates (old_operate.go): they
// go with it.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// signalledEnv is operateEnv for a task begun before tasks handed their
// items to hosts by update: a Dispatch signals them, and they reply.
func signalledEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	env := operateEnv(t)
	env.OnGetVersion(VersionDeliverUpdates, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	return env
}

func twoHostItems() []proc.Item {
	return []proc.Item{
		{Target: proc.Target{IP: "10.0.0.1"}, Process: proc.ProcessID{Namespace: "ns", Name: "p"}},
		{Target: proc.Target{IP: "10.0.0.2"}, Process: proc.ProcessID{Namespace: "ns", Name: "p"}},
	}
}

// TestOperateCancelTellsItsHosts: a cancel signal makes the task hand a
// cancel of its id to each host with an item still pending, and the task
// ends with what the hosts answer.
func TestOperateCancelTellsItsHosts(t *testing.T) {
	env := signalledEnv(t)
	env.RegisterActivityWithOptions(func(context.Context, DispatchInput) (DispatchOutput, error) {
		return DispatchOutput{}, nil
	}, activity.RegisterOptions{Name: "Dispatch"})
	var mu sync.Mutex
	var got []HostCancel
	env.RegisterActivityWithOptions(func(_ context.Context, in CancelHostsInput) error {
		mu.Lock()
		got = append(got, in.Cancels...)
		mu.Unlock()
		return nil
	}, activity.RegisterOptions{Name: "CancelHosts"})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(ReplySignal, HostReply{Index: 0, Result: proc.HostResult{Code: proc.CodeSuccess, Message: "success"}})
	}, time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(CancelSignal, nil) }, 2*time.Second)
	// The hosts answer: one had finished, the other, told of the cancel,
	// had not started. Sent on the test clock, not from the activity's
	// goroutine, which the skipped clock could outrun to the backstop.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(ReplySignal, HostReply{Index: 1, Result: proc.Fail(proc.CodeCancelled, "cancelled: not run")})
	}, 3*time.Second)
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:T", Op: proc.OpRestart, Items: twoHostItems()})

	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "GSETASK:T" || got[0].Host.IP != "10.0.0.2" {
		t.Fatalf("cancels handed to hosts: %+v, want the task's id to 10.0.0.2 only (10.0.0.1 had answered)", got)
	}
	if res.Done != 2 || res.Results[0].Code != proc.CodeSuccess || res.Results[1].Code != proc.CodeCancelled {
		t.Fatalf("results: %+v", res.Results)
	}
}

// TestOperateDispatchFailureNeverReportsARunOpAsNotRun: Dispatch fails
// after delivering one item. The task cancels every pending item on its
// host by its request id, keeps the answer the delivered item's host gives,
// and answers the other 9199 "not run" only once its deadline has passed.
func TestOperateDispatchFailureNeverReportsARunOpAsNotRun(t *testing.T) {
	env := signalledEnv(t)
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	env.SetStartTime(start)
	env.RegisterActivityWithOptions(func(context.Context, DispatchInput) (DispatchOutput, error) {
		return DispatchOutput{}, temporal.NewNonRetryableApplicationError("server unavailable", "test", errors.New("down"))
	}, activity.RegisterOptions{Name: "Dispatch"})
	var mu sync.Mutex
	var got []string
	env.RegisterActivityWithOptions(func(_ context.Context, in CancelHostsInput) error {
		mu.Lock()
		for _, c := range in.Cancels {
			got = append(got, c.Host.IP+"="+c.ID)
		}
		mu.Unlock()
		return nil
	}, activity.RegisterOptions{Name: "CancelHosts"})
	// Item 0 had reached its host, and ran before the cancel: its answer
	// comes on the test clock.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(ReplySignal, HostReply{Index: 0, Result: proc.HostResult{Code: proc.CodeSuccess, Message: "success"}})
	}, time.Second)
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:T", Op: proc.OpStart, Items: twoHostItems()})

	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "10.0.0.1=GSETASK:T#0,10.0.0.2=GSETASK:T#1" {
		t.Fatalf("cancels: %v, want each pending request by its id", got)
	}
	if r := res.Results[0]; r.Code != proc.CodeSuccess {
		t.Fatalf("delivered item: %+v, want the host's own answer", r)
	}
	if r := res.Results[1]; r.Code != proc.CodeInternal || !strings.Contains(r.Message, "not run") {
		t.Fatalf("undelivered item: %+v, want 9199 not run", r)
	}
	if now, deadline := env.Now(), policies.Deadlines(start, proc.OpStart, twoHostItems())[1]; now.Before(deadline) {
		t.Fatalf("answered not run at %s, before the item's deadline %s", now.Sub(start), deadline.Sub(start))
	}
}
