package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/proc"
)

// TestHostCancelEndsTheRunningOpAndDropsTheQueued: a cancel of task T
// cancels T's running op (its activity sees its context end, as the SSH
// runner's command would) and answers it 9109; T's queued request and one arriving after the cancel never
// run (9109 not run); another task's request still runs.
func TestHostCancelEndsTheRunningOpAndDropsTheQueued(t *testing.T) {
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
	ht.send(time.Second, startRequest("T#0", 0, "a"))
	ht.send(time.Second, startRequest("T#1", 1, "b"))
	ht.send(time.Second, startRequest("U#0", 7, "u"))
	ht.send(3*time.Second, startRequest("T#2", 2, "c"))
	ht.run()

	select {
	case <-ended:
	default:
		t.Fatal("the running op's activity never saw its context end")
	}
	// The suite reports a cancelled activity as cancelled whatever it
	// returned; against the server, HostOp's own result comes back, and
	// the answer adds the state probed after (internal/e2e's cancel test).
	if r := ht.replies[0]; r.Code != proc.CodeCancelled {
		t.Fatalf("running op: %+v, want 9109", r)
	}
	for _, i := range []int{1, 2} {
		if r := ht.replies[i]; r.Code != proc.CodeCancelled || !strings.Contains(r.Message, "not run") {
			t.Fatalf("request %d of the cancelled task: %+v, want 9109 not run", i, r)
		}
	}
	if r := ht.replies[7]; r.Code != proc.CodeSuccess {
		t.Fatalf("another task's request: %+v, want it run", r)
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
