package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// VersionTaskOpAttempts: a task's op is retried by its host workflow, one
// activity per attempt, so a cancel between two attempts answers with the
// process's state after the attempt that ran (the server retried the one
// activity, and such a cancel answered "not run").
const VersionTaskOpAttempts = "task-op-attempts"

// runTaskOp runs a task's op, taking the task's cancels while it runs and
// while it waits to try again.
func (h *host) runTaskOp(ctx workflow.Context, req HostRequest, e Entry, in activities.HostOpInput) activities.HostOpOutput {
	if workflow.GetVersion(ctx, VersionTaskOpAttempts, workflow.DefaultVersion, 1) < 1 {
		out, err := h.tryOp(ctx, req, e, in, policies.OpAttempts, nil)
		if err != nil {
			out = activities.HostOpOutput{Result: activityFailure(err)}
		}
		return out
	}
	var failed *attemptFailure
	for n := 1; ; n++ {
		in.Attempt = int32(n)
		out, err := h.tryOp(ctx, req, e, in, 1, failed)
		if err == nil {
			return out
		}
		wait, again := policies.OpRetryAfter(n)
		if !again || !retryable(err) {
			return activities.HostOpOutput{Result: activityFailure(err)}
		}
		failed = &attemptFailure{n: n, err: err}
		if h.cancelledWhileWaiting(ctx, req, wait) {
			return activities.HostOpOutput{Result: h.cancelledAfterAttempt(ctx, req, e, failed)}
		}
	}
}

// tryOp runs one activity of a task's op, which the server tries up to
// attempts times, and awaits it taking cancels (awaitOp); failed is the
// attempt before, if one ran and failed.
func (h *host) tryOp(ctx workflow.Context, req HostRequest, e Entry, in activities.HostOpInput, attempts int, failed *attemptFailure) (activities.HostOpOutput, error) {
	var a *activities.Activities
	var out activities.HostOpOutput
	octx, cancel := workflow.WithCancel(opOptions(ctx, in, attempts))
	defer cancel()
	err := h.awaitOp(ctx, req, e, workflow.ExecuteActivity(octx, a.HostOp, in), cancel, &out, failed)
	return out, err
}

// attemptFailure is a task op's attempt that ran and failed.
type attemptFailure struct {
	n   int
	err error
}

// retryable reports whether another attempt may do better: any failure
// but a cancel or one its activity marked final, as the server judges.
func retryable(err error) bool {
	var ce *temporal.CanceledError
	var ae *temporal.ApplicationError
	return !errors.As(err, &ce) && !(errors.As(err, &ae) && ae.NonRetryable())
}

// cancelledWhileWaiting waits before the next attempt, taking cancels; it
// reports whether one covered req.
func (h *host) cancelledWhileWaiting(ctx workflow.Context, req HostRequest, wait time.Duration) bool {
	tctx, stop := workflow.WithCancel(ctx)
	defer stop()
	return h.awaitTakingCancels(ctx, req, workflow.NewTimer(tctx, wait), stop)
}

// cancelledAfterAttempt answers a task op cancelled after one of its
// attempts had run on the host and failed: not "not run", but what that
// attempt ended with and the process's state now.
func (h *host) cancelledAfterAttempt(ctx workflow.Context, req HostRequest, e Entry, f *attemptFailure) proc.HostResult {
	return proc.Fail(proc.CodeCancelled, "cancelled while running: attempt %d of the op ended (%s), and the task was cancelled before another; %s",
		f.n, oneLine(f.err.Error()), h.stateAfter(ctx, req, e, f))
}
