package workflows

import (
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// taskOp is one task's op on the host, attempt by attempt.
type taskOp struct {
	req HostRequest
	e   Entry
	in  activities.HostOpInput
	// local: attempts begin as local activities.
	local bool
	// started: the attempt under way has run on the host (a local one
	// starts at once), so a cancel of it is never "not run".
	started bool
	// failed is the attempt before, if one ran and failed.
	failed *attemptFailure
}

// attemptFailure is a task op's attempt that ran and failed.
type attemptFailure struct {
	n   int
	err error
}

// runTaskOp runs a task's op, taking the task's cancels while it runs and
// while it waits to try again.
func (h *host) runTaskOp(ctx workflow.Context, req HostRequest, e Entry, in activities.HostOpInput) activities.HostOpOutput {
	op := &taskOp{req: req, e: e, in: in}
	if !h.has(ctx, VersionTaskOpAttempts) {
		return h.runTaskOpWhole(ctx, op)
	}
	op.local = h.has(ctx, VersionTaskOpLocal)
	for n := 1; ; n++ {
		op.in.Attempt = int32(n)
		out, err := h.tryOp(ctx, op, 1)
		if err == nil {
			return out
		}
		wait, again := policies.OpRetryAfter(n)
		if !again || !retryable(err) {
			return activities.HostOpOutput{Result: activityFailure(err)}
		}
		op.failed = &attemptFailure{n: n, err: err}
		if h.cancelledWhileWaiting(ctx, req, wait) {
			return activities.HostOpOutput{Result: h.cancelledAfterAttempt(ctx, op)}
		}
	}
}

// tryOp runs one attempt of a task's op, which the server tries up to
// attempts times when it is an activity, and awaits it taking cancels.
// A local attempt that outlasts policies.LocalOpBudget goes on as an
// activity: the activity finds the command the local one started on the
// host and waits for it, so the op is neither cut short nor run twice.
func (h *host) tryOp(ctx workflow.Context, op *taskOp, attempts int) (activities.HostOpOutput, error) {
	op.started = false
	if op.local {
		op.started = true
		lctx, cancel := workflow.WithCancel(ctx)
		out, err := h.awaitOp(ctx, op, workflow.ExecuteLocalActivity(localOpOptions(lctx, op.in), HostOpActivity, op.in), cancel)
		cancel()
		if !outlasted(err) {
			return out, err
		}
	}
	actx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	return h.awaitOp(ctx, op, workflow.ExecuteActivity(opOptions(actx, op.in, attempts), HostOpActivity, op.in), cancel)
}

// localOpOptions are a local op's options: it has policies.LocalOpBudget,
// and the workflow makes each attempt.
func localOpOptions(ctx workflow.Context, in activities.HostOpInput) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: min(policies.LocalOpBudget, policies.HostOpDeadline(in.Op, in.Spec)),
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// outlasted reports whether a local attempt ran out of its budget, its
// only timeout (the SDK names it by the shorter of its two).
func outlasted(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && (te.TimeoutType() == enumspb.TIMEOUT_TYPE_START_TO_CLOSE || te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE)
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
func (h *host) cancelledAfterAttempt(ctx workflow.Context, op *taskOp) proc.HostResult {
	return proc.Fail(proc.CodeCancelled, "cancelled while running: attempt %d of the op ended (%s), and the task was cancelled before another; %s",
		op.failed.n, oneLine(op.failed.err.Error()), h.stateAfter(ctx, op, op.failed.n))
}
