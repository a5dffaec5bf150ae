package activities

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// waitsForSession is a host whose sessions are all taken: a command waits
// for one until its context ends, as the SSH pool does, and never starts.
type waitsForSession struct{}

func (waitsForSession) Run(ctx context.Context, h inventory.Host, _ transport.Command) (transport.Result, error) {
	<-ctx.Done()
	return transport.Result{}, &transport.Error{Kind: transport.KindTimeout, Host: h.IP,
		Err: fmt.Errorf("no free session in 50ms, all 8 busy; command not started: %w", ctx.Err())}
}

// TestHostOpLostAttemptIsRetriedNotAnswered: an op whose context the SDK
// ended because its heartbeats no longer reached the server answers
// nothing (an error has the attempt retried); one ended by its deadline,
// or by its task's cancel, answers what it saw, as the workflow expects.
func TestHostOpLostAttemptIsRetriedNotAnswered(t *testing.T) {
	acts := oneHost(t, waitsForSession{})
	in := HostOpInput{RequestID: "t#0", Op: proc.OpStart, Target: proc.Target{IP: "10.0.0.1"},
		Process: proc.ProcessID{Namespace: "n", Name: "svc"},
		Spec:    proc.Spec{ProcName: "svc", SetupPath: "/data/svc", PidPath: "/data/svc/svc.pid", StartCmd: "true"}}
	for _, tc := range []struct {
		name     string
		end      func(context.Context) (context.Context, func())
		answered bool
	}{
		{"heartbeats lost", func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(ctx)
			time.AfterFunc(50*time.Millisecond, func() { cancel(errors.New("context deadline exceeded recording a heartbeat")) })
			return ctx, func() { cancel(nil) }
		}, false},
		{"task cancelled", func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(ctx)
			time.AfterFunc(50*time.Millisecond, func() { cancel(temporal.NewCanceledError()) })
			return ctx, func() { cancel(nil) }
		}, true},
		{"deadline", func(ctx context.Context) (context.Context, func()) {
			return context.WithTimeout(ctx, 50*time.Millisecond)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.end(context.Background())
			defer cancel()
			out, err := acts.HostOp(ctx, in)
			switch {
			case tc.answered && err != nil:
				t.Fatalf("want an answer, got error %v", err)
			case tc.answered && out.Result.Code != proc.CodeTimeout:
				t.Fatalf("answer %d %q, want 9105 (the session wait ended)", out.Result.Code, out.Result.Message)
			case !tc.answered && err == nil:
				t.Fatalf("answered %d %q for an attempt the worker gave up; want an error", out.Result.Code, out.Result.Message)
			}
		})
	}
}
