package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/proc"
)

// cancelScenario: a cancel of task T arrives while T#0's op runs on the
// host (its HostOp sees its context end, as the SSH runner's command
// would); T#1 waits in the queue, T#2 arrives after the cancel, and U#0 is
// another task's. send picks how requests reach the host.
func cancelScenario(t *testing.T, pin func(*hostTest), send func(HostRequest) HostRequest) *hostTest {
	ended := make(chan struct{}, 1)
	var ht *hostTest
	ht = newHostTest(t, func(ctx context.Context, in activities.HostOpInput) (activities.HostOpOutput, error) {
		switch {
		case in.RequestID == "T#0":
			// The cancel arrives while the op runs (the suite's clock
			// stands still while an activity runs, so it is sent from here).
			go ht.env.SignalWorkflow(CancelTaskSignal, "T")
			for {
				select {
				case <-ctx.Done():
					// As HostOp does: the command ended, and a result.
					ended <- struct{}{}
					return activities.HostOpOutput{Result: proc.Fail(proc.CodeTimeout, "restart_cmd ended: %v", ctx.Err())}, nil
				case <-time.After(100 * time.Millisecond):
					activity.RecordHeartbeat(ctx)
				}
			}
		}
		return succeed(ctx, in)
	})
	pin(ht)
	ht.send(time.Second, send(startRequest("T#0", 0, "a")))
	ht.send(time.Second, send(startRequest("T#1", 1, "b")))
	ht.send(time.Second, send(startRequest("U#0", 7, "u")))
	ht.send(3*time.Second, send(startRequest("T#2", 2, "c")))
	ht.run()

	select {
	case <-ended:
	default:
		t.Fatal("the running op never saw its context end")
	}
	for _, i := range []int{1, 2} {
		if r := ht.replies[i]; r.Code != proc.CodeCancelled || !strings.Contains(r.Message, "not run") {
			t.Fatalf("request %d of the cancelled task: %+v, want 9109 not run", i, r)
		}
	}
	if r := ht.replies[7]; r.Code != proc.CodeSuccess {
		t.Fatalf("another task's request: %+v, want it run", r)
	}
	return ht
}

// TestHostCancelEndsTheRunningOpAndDropsTheQueued: a cancel of task T
// ends T's running op, run as a local activity, and answers it 9109 with
// the state a probe finds after ending what the op left running; T's
// queued request and one arriving after the cancel never run (9109 not
// run); another task's request still runs.
func TestHostCancelEndsTheRunningOpAndDropsTheQueued(t *testing.T) {
	ht := cancelScenario(t, func(*hostTest) {}, func(r HostRequest) HostRequest { return r })
	if r := ht.replies[0]; r.Code != proc.CodeCancelled || !strings.Contains(r.Message, "cancelled while running: it was ended; process a is running") {
		t.Fatalf("running op: %+v, want 9109 with the state after", r)
	}
	if got := strings.Join(ht.ran, ","); got != "T#0,T#0/probe,U#0" {
		t.Fatalf("HostOp ran %s, want T#0, its probe after the cancel, and U#0", got)
	}
	if p := ht.ins[1]; p.EndRequestID != "T#0" || p.EndAttempts != 1 || p.Op != proc.OpStatus {
		t.Fatalf("probe after the cancel: %+v, want a status that first ends what attempt 1 of T#0 noted", p)
	}
}

// TestHostCancelEndsTheRunningActivityOp is the same for a host workflow
// whose run ran ops as activities (begun before local ones), its requests
// signalled.
func TestHostCancelEndsTheRunningActivityOp(t *testing.T) {
	ht := cancelScenario(t, func(ht *hostTest) {
		ht.env.OnGetVersion(VersionTaskOpLocal, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	}, signalled)
	// The suite reports a cancelled activity as cancelled whatever it
	// returned; against the server, HostOp's own result comes back, and
	// the answer adds the state probed after (internal/e2e's cancel test).
	if r := ht.replies[0]; r.Code != proc.CodeCancelled {
		t.Fatalf("running op: %+v, want 9109", r)
	}
	if got := strings.Join(ht.ran, ","); got != "T#0,U#0" {
		t.Fatalf("HostOp ran %s, want T#0 and U#0 only", got)
	}
}

// TestHostCancelOfAFinishedOpKeepsItsAnswer: a cancel that reaches a host
// after the task's op finished there changes nothing: the answer stays the
// op's own.
func TestHostCancelOfAFinishedOpKeepsItsAnswer(t *testing.T) {
	ht := newHostTest(t, succeed)
	ht.send(time.Second, startRequest("T#0", 0, "a"))
	ht.env.RegisterDelayedCallback(func() { ht.env.SignalWorkflow(CancelTaskSignal, "T") }, 5*time.Second)
	ht.run()
	if r := ht.replies[0]; r.Code != proc.CodeSuccess {
		t.Fatalf("finished op: %+v, want its own 0", r)
	}
	if got := strings.Join(ht.ran, ","); got != "T#0" {
		t.Fatalf("HostOp ran %s", got)
	}
}
