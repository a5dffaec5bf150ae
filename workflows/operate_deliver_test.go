package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// answerAll is a Deliver whose hosts all answer 0.
func answerAll(in DeliverInput) []HostReply {
	out := make([]HostReply, len(in.Items))
	for i := range in.Items {
		out[i] = HostReply{Index: in.Indexes[i], Result: proc.HostResult{Code: proc.CodeSuccess, Message: "success"}}
	}
	return out
}

// TestOperateDeliversInHostBatches: a task hands its items out in batches,
// each host's items in one batch with their deadlines, and every item ends
// with its host's answer.
func TestOperateDeliversInHostBatches(t *testing.T) {
	env := operateEnv(t)
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	env.SetStartTime(start)
	var items []proc.Item
	for i := 0; i < policies.DeliverBatch+10; i++ {
		ip := "10.0.0." + string(rune('a'+i%26))
		items = append(items, proc.Item{Target: proc.Target{IP: ip}, Process: proc.ProcessID{Namespace: "ns", Name: string(rune('A' + i/26))}})
	}
	var mu sync.Mutex
	var batches []DeliverInput
	env.RegisterActivityWithOptions(func(_ context.Context, in DeliverInput) ([]HostReply, error) {
		mu.Lock()
		batches = append(batches, in)
		mu.Unlock()
		return answerAll(in), nil
	}, activity.RegisterOptions{Name: "Deliver"})
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:T", Op: proc.OpStart, Items: items})
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Done != len(items) || res.Failed != 0 {
		t.Fatalf("done %d failed %d of %d", res.Done, res.Failed, len(items))
	}
	deadlines := policies.Deadlines(start, proc.OpStart, items)
	where := map[proc.HostID]int{}
	seen := 0
	for b, in := range batches {
		for i, it := range in.Items {
			if n, ok := where[it.Target.HostID()]; ok && n != b {
				t.Fatalf("host %s in batches %d and %d", it.Target.HostID(), n, b)
			}
			where[it.Target.HostID()] = b
			g := in.Indexes[i]
			if items[g].Key() != it.Key() || !in.Deadlines[i].Equal(deadlines[g]) {
				t.Fatalf("batch %d item %d: %s deadline %s, want %s %s", b, i, it.Key(), in.Deadlines[i], items[g].Key(), deadlines[g])
			}
			seen++
		}
	}
	if seen != len(items) || len(batches) < 2 {
		t.Fatalf("%d items in %d batches, want all %d in more than one", seen, len(batches), len(items))
	}
}

// TestOperateDeliverGivenUpIsRetried: a batch the engine gives up (as a
// loaded server does when its heartbeats stop arriving) is tried again,
// and its hosts answer for themselves: none answers for the batch.
func TestOperateDeliverGivenUpIsRetried(t *testing.T) {
	env := operateEnv(t)
	attempts := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, in DeliverInput) ([]HostReply, error) {
		attempts++
		if activity.GetInfo(ctx).Attempt < 3 {
			return nil, errors.New("activity Heartbeat timeout")
		}
		return answerAll(in), nil
	}, activity.RegisterOptions{Name: "Deliver"})
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:T", Op: proc.OpRestart, Items: twoHostItems()})
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Results {
		if r.Code != proc.CodeSuccess {
			t.Fatalf("%s: %+v, want its host's own 0", r.Key, r.HostResult)
		}
	}
	if attempts != 3 {
		t.Fatalf("Deliver ran %d times, want 3", attempts)
	}
}

// TestOperateDeliverNeverAnsweredEndsByTheDeadline: an engine that never
// runs a batch ends the task, each item answered 9105; the task does not
// wait at 115. (The suite tries an activity 10 times at most; the server
// tries it until policies.DeliverLimit, TestDeliverLimit.)
func TestOperateDeliverNeverAnsweredEndsByTheDeadline(t *testing.T) {
	env := operateEnv(t)
	env.RegisterActivityWithOptions(func(ctx context.Context, _ DeliverInput) ([]HostReply, error) {
		return nil, errors.New("activity Heartbeat timeout")
	}, activity.RegisterOptions{Name: "Deliver"})
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:T", Op: proc.OpStart, Items: twoHostItems()})
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Results {
		if r.Code != proc.CodeTimeout || !strings.Contains(r.Message, "by the task's deadline") {
			t.Fatalf("%s: %+v, want 9105 no answer by the deadline", r.Key, r.HostResult)
		}
	}
}

// TestOperateDeliveredCancelTellsItsHosts: a cancel while a batch waits on
// its hosts hands the task's cancel to each host with an item pending, and
// the task ends with what the hosts answer.
func TestOperateDeliveredCancelTellsItsHosts(t *testing.T) {
	env := operateEnv(t)
	var mu sync.Mutex
	var got []HostCancel
	cancelled := make(chan struct{})
	env.RegisterActivityWithOptions(func(_ context.Context, in CancelHostsInput) error {
		mu.Lock()
		got = append(got, in.Cancels...)
		mu.Unlock()
		close(cancelled)
		return nil
	}, activity.RegisterOptions{Name: "CancelHosts"})
	env.RegisterActivityWithOptions(func(ctx context.Context, in DeliverInput) ([]HostReply, error) {
		// The hosts answer once they have the cancel.
		<-cancelled
		out := answerAll(in)
		for i := range out {
			out[i].Result = proc.Fail(proc.CodeCancelled, "cancelled: not run")
		}
		return out, nil
	}, activity.RegisterOptions{Name: "Deliver"})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(CancelSignal, nil) }, time.Second)
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:T", Op: proc.OpRestart, Items: twoHostItems()})
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "GSETASK:T" || got[1].ID != "GSETASK:T" {
		t.Fatalf("cancels handed to hosts: %+v, want the task's id to both", got)
	}
	if res.Done != 2 || res.Results[0].Code != proc.CodeCancelled || res.Results[1].Code != proc.CodeCancelled {
		t.Fatalf("results: %+v", res.Results)
	}
}

// TestStatusBatchGivenUpIsRetried: a status batch the engine gives up is
// probed again, and its hosts answer for themselves.
func TestStatusBatchGivenUpIsRetried(t *testing.T) {
	env := operateEnv(t)
	attempts := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, in StatusInput) ([]HostReply, error) {
		attempts++
		if activity.GetInfo(ctx).Attempt < 4 {
			return nil, errors.New("activity Heartbeat timeout")
		}
		out := make([]HostReply, len(in.Items))
		for i := range in.Items {
			out[i] = HostReply{Index: in.Offset + i, Result: proc.HostResult{Code: proc.CodeNotRunning, Message: "process(p) is not running"}}
		}
		return out, nil
	}, activity.RegisterOptions{Name: "Status"})
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:T", Op: proc.OpStatus, Items: twoHostItems()})
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Results {
		if r.Code != proc.CodeNotRunning {
			t.Fatalf("%s: %+v, want its host's own 829", r.Key, r.HostResult)
		}
	}
	if attempts != 4 {
		t.Fatalf("Status ran %d times, want 4", attempts)
	}
}

// TestOperateDeliverProgressIsPerHost: a batch's answers reach the task as
// they come, so its progress counts each host that answered while the
// batch still waits on others.
func TestOperateDeliverProgressIsPerHost(t *testing.T) {
	env := operateEnv(t)
	release := make(chan struct{})
	env.RegisterActivityWithOptions(func(_ context.Context, in DeliverInput) ([]HostReply, error) {
		out := answerAll(in)
		env.SignalWorkflow(AnswersSignal, out[:1])
		<-release
		return out, nil
	}, activity.RegisterOptions{Name: "Deliver"})
	var mid Counts
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(CountsQuery)
		if err == nil {
			err = v.Get(&mid)
		}
		if err != nil {
			t.Errorf("counts: %v", err)
		}
		close(release)
	}, time.Second)
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:T", Op: proc.OpStart, Items: twoHostItems()})
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if mid.Done != 1 || res.Done != 2 {
		t.Fatalf("done %d while the batch waited, %d at the end; want 1 and 2", mid.Done, res.Done)
	}
}
