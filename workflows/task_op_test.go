package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// lostFirstAttempt fails a task op's first attempt as a worker that lost
// it does, and answers every other activity as running. It notes each
// attempt's number, and each probe's input in probes (if not nil).
func lostFirstAttempt(attempts *[]int32, probes ...*[]activities.HostOpInput) func(context.Context, activities.HostOpInput) (activities.HostOpOutput, error) {
	return func(ctx context.Context, in activities.HostOpInput) (activities.HostOpOutput, error) {
		if strings.HasSuffix(in.RequestID, "/probe") && len(probes) > 0 {
			*probes[0] = append(*probes[0], in)
		}
		if !strings.HasSuffix(in.RequestID, "/probe") {
			*attempts = append(*attempts, in.Attempt)
			if in.Attempt == 1 {
				return activities.HostOpOutput{}, errors.New("attempt given up by the worker")
			}
		}
		return activities.HostOpOutput{Result: proc.HostResult{Code: proc.CodeSuccess, Message: "success"}, Alive: true, Pid: 42}, nil
	}
}

// TestTaskOpCancelledBetweenAttemptsSaysOneRan: a task's op whose first
// attempt ran and was lost is cancelled while it waits to try again. The
// answer is 9109 saying that attempt ended and how the process is now (a
// probe ran, told to end what the lost attempt left running), not "not
// run"; no second attempt runs.
func TestTaskOpCancelledBetweenAttemptsSaysOneRan(t *testing.T) {
	var attempts []int32
	var probes []activities.HostOpInput
	ht := newHostTest(t, lostFirstAttempt(&attempts, &probes))
	ht.send(time.Second, startRequest("T#0", 0, "a"))
	// The first attempt fails at once at 1 s; the next waits a second.
	ht.env.RegisterDelayedCallback(func() { ht.env.SignalWorkflow(CancelTaskSignal, "T") }, 1500*time.Millisecond)
	ht.run()

	r := ht.replies[0]
	for _, want := range []string{"cancelled while running", "attempt 1 of the op ended", "attempt given up by the worker", "process a is running"} {
		if r.Code != proc.CodeCancelled || !strings.Contains(r.Message, want) {
			t.Fatalf("answer %d %q, want 9109 saying %q", r.Code, r.Message, want)
		}
	}
	if got := strings.Join(ht.ran, ","); got != "T#0,T#0/probe" {
		t.Fatalf("HostOp ran %s, want the first attempt and the probe after the cancel", got)
	}
	if p := probes[0]; p.Op != proc.OpStatus || p.EndRequestID != "T#0" || p.EndAttempts != 1 {
		t.Fatalf("probe %v ending %q's first %d attempts, want a status ending T#0's first 1", p.Op, p.EndRequestID, p.EndAttempts)
	}
}

// TestTaskOpRetriedByItsHost: a task's op whose first attempt was lost is
// tried again, told it is attempt 2 (so it looks for what the first did),
// and answers with that attempt's result.
func TestTaskOpRetriedByItsHost(t *testing.T) {
	var attempts []int32
	ht := newHostTest(t, lostFirstAttempt(&attempts))
	ht.send(time.Second, startRequest("T#0", 0, "a"))
	ht.run()
	if r := ht.replies[0]; r.Code != proc.CodeSuccess {
		t.Fatalf("answer %+v, want the second attempt's 0", r)
	}
	if got := fmt.Sprint(attempts); got != "[1 2]" {
		t.Fatalf("attempts %s, want [1 2]", got)
	}
}

// TestTaskOpGivesUpAfterItsAttempts: an op that fails every attempt is
// tried three times and answers the last failure.
func TestTaskOpGivesUpAfterItsAttempts(t *testing.T) {
	var attempts []int32
	ht := newHostTest(t, func(_ context.Context, in activities.HostOpInput) (activities.HostOpOutput, error) {
		attempts = append(attempts, in.Attempt)
		return activities.HostOpOutput{}, fmt.Errorf("attempt %d given up by the worker", in.Attempt)
	})
	ht.send(time.Second, startRequest("T#0", 0, "a"))
	ht.run()
	if r := ht.replies[0]; r.Code != proc.CodeInternal || !strings.Contains(r.Message, "attempt 3 given up") {
		t.Fatalf("answer %+v, want 9199 naming the third attempt's failure", r)
	}
	if got := fmt.Sprint(attempts); got != "[1 2 3]" {
		t.Fatalf("attempts %s, want [1 2 3]", got)
	}
}

// TestTaskOpOutlastingItsLocalBudgetGoesOnAsAnActivity: an op still
// running when its local attempt's budget ends is not failed or tried
// again: the same attempt goes on as an activity (which, on a host, finds
// the command the local one started and waits for it), and the op
// answers that activity's result.
func TestTaskOpOutlastingItsLocalBudgetGoesOnAsAnActivity(t *testing.T) {
	type run struct {
		local   bool
		attempt int32
	}
	// The local run is left behind on a goroutine of its own.
	var mu sync.Mutex
	var runs []run
	ht := newHostTest(t, func(ctx context.Context, in activities.HostOpInput) (activities.HostOpOutput, error) {
		local := activity.GetInfo(ctx).IsLocalActivity
		mu.Lock()
		runs = append(runs, run{local, in.Attempt})
		mu.Unlock()
		if local {
			<-ctx.Done() // the command outlasts the budget
			return activities.HostOpOutput{}, activities.OutlastedLocally(ctx)
		}
		return activities.HostOpOutput{Result: proc.HostResult{Code: proc.CodeSuccess, Message: "success"}, Alive: true, Pid: 42}, nil
	})
	// A local activity's budget runs on the wall clock.
	ht.env.SetTestTimeout(policies.LocalOpBudget + 30*time.Second)
	ht.send(time.Second, startRequest("T#0", 0, "a"))
	ht.run()
	if r := ht.replies[0]; r.Code != proc.CodeSuccess {
		t.Fatalf("answer %+v, want the activity's 0", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(runs); got != "[{true 1} {false 1}]" {
		t.Fatalf("runs %s, want attempt 1 local, then attempt 1 as an activity", got)
	}
}

// TestHostBornAfterAChangeTakesItWithoutAsking: a host run begun by a
// worker that has every change (Born = LedgerGen) takes their branches
// without GetVersion, so its first task writes no version markers; a run
// begun before Born was kept asks, as it always did, and takes the same
// branch.
func TestHostBornAfterAChangeTakesItWithoutAsking(t *testing.T) {
	for _, born := range []int{0, LedgerGen} {
		var local []bool
		asked := 0
		ht := newHostTest(t, func(ctx context.Context, in activities.HostOpInput) (activities.HostOpOutput, error) {
			local = append(local, activity.GetInfo(ctx).IsLocalActivity)
			return succeed(ctx, in)
		})
		ht.env.OnGetVersion(VersionTaskOpLocal, workflow.DefaultVersion, 1).Run(func(mock.Arguments) { asked++ }).Return(workflow.Version(1))
		ht.send(time.Second, startRequest("T#0", 0, "a"))
		ht.env.ExecuteWorkflow(HostWorkflowName, HostState{Host: proc.HostID{IP: "10.0.0.1"}, Born: born})
		if r := ht.replies[0]; r.Code != proc.CodeSuccess || len(local) != 1 || !local[0] {
			t.Fatalf("born %d: answer %+v, local %v; want 0 from a local op", born, r, local)
		}
		if want := map[bool]int{true: 0, false: 1}[born == LedgerGen]; asked != want {
			t.Fatalf("born %d: GetVersion asked %d times, want %d", born, asked, want)
		}
	}
}
