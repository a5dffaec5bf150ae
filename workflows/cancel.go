package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// Cancelling a task (starter cancel, POST /api/v2/proc/drover/cancel_task)
// signals its Operate workflow, which tells each of its hosts with a
// CancelTaskSignal carrying the task id. A host drops the task's queued
// requests (and any that arrive later), and cancels the task's running op:
// its activity's context ends, and with it the remote command. Every item
// is answered by its host, so each key says what happened there: its own
// result when it had finished, else 9109 saying whether it ran.

// maxCancelledTasks bounds the cancelled ids a host remembers; a request
// of a cancelled task arrives within seconds of the cancel.
const maxCancelledTasks = 100

// taskOf is the task a request belongs to. Requests sent before the task
// was a field of its own carry it in their id, "<task id>#<index>".
func taskOf(req HostRequest) string {
	if req.TaskID != "" {
		return req.TaskID
	}
	if i := strings.LastIndexByte(req.RequestID, '#'); i > 0 {
		return req.RequestID[:i]
	}
	return ""
}

// notRunCancelled answers a request of a cancelled task that never ran.
func notRunCancelled(req HostRequest) proc.HostResult {
	return proc.Fail(proc.CodeCancelled, "cancelled: not run (task %s was cancelled before this host started it)", taskOf(req))
}

// cancels reports whether a cancel of id (a task, or one request) covers req.
func cancels(id string, req HostRequest) bool {
	return id != "" && (id == req.RequestID || id == taskOf(req))
}

// takeCancels applies every cancel already delivered, without blocking.
func (h *host) takeCancels(ctx workflow.Context) {
	var id string
	for h.cancels.ReceiveAsync(&id) {
		h.cancelTask(ctx, id)
	}
}

// cancelTask remembers a cancelled task (or request) and answers its
// queued requests. It reports false when the history predates cancels
// (the signal is ignored, as it was then).
func (h *host) cancelTask(ctx workflow.Context, id string) bool {
	if id == "" || !h.has(ctx, VersionCancelTask) {
		return false
	}
	if !slices.Contains(h.CancelledTasks, id) {
		h.CancelledTasks = append(h.CancelledTasks, id)
		if len(h.CancelledTasks) > maxCancelledTasks {
			h.CancelledTasks = h.CancelledTasks[len(h.CancelledTasks)-maxCancelledTasks:]
		}
	}
	h.drain()
	kept := h.Queue[:0]
	var dropped []HostRequest
	for _, req := range h.Queue {
		if cancels(id, req) && !h.seen(req.RequestID) {
			dropped = append(dropped, req)
			continue
		}
		kept = append(kept, req)
	}
	h.Queue = kept
	for _, req := range dropped {
		h.remember(req.RequestID)
		h.reply(ctx, req, notRunCancelled(req))
	}
	return true
}

// cancelled reports whether req belongs to a cancelled task, or was
// cancelled itself.
func (h *host) cancelled(req HostRequest) bool {
	for _, id := range h.CancelledTasks {
		if cancels(id, req) {
			return true
		}
	}
	return false
}

// awaitOp waits for an attempt of a task's op on the host while taking
// cancels; a cancel of the op's own task cancels its activity, which ends
// the remote command, and the op's answer then says so, with the process's
// state after.
func (h *host) awaitOp(ctx workflow.Context, op *taskOp, fut workflow.Future, cancel workflow.CancelFunc) (activities.HostOpOutput, error) {
	var out activities.HostOpOutput
	cancelled := h.awaitTakingCancels(ctx, op.req, fut, cancel)
	err := fut.Get(ctx, &out)
	if !cancelled {
		return out, err
	}
	// An activity's HostOp answers with a result whatever happens on the
	// host, also when its context ends: a cancelled error means this
	// attempt never started, unless it began as a local one, which
	// starts at once and is answered without waiting for it.
	var ce *temporal.CanceledError
	isCancel := errors.As(err, &ce)
	switch {
	case isCancel && !op.started && op.failed != nil:
		return activities.HostOpOutput{Result: h.cancelledAfterAttempt(ctx, op)}, nil
	case isCancel && !op.started:
		return activities.HostOpOutput{Result: notRunCancelled(op.req)}, nil
	case err == nil && out.Result.Code == proc.CodeSuccess:
		return out, nil // it finished before the cancel reached it
	}
	what := "it was ended"
	if err == nil {
		what = "it was ended (" + out.Result.Message + ")"
	}
	ended := 0
	if op.failed != nil {
		ended = op.failed.n
	}
	if op.started {
		// The cancelled attempt may still be ending its command: the
		// probe ends it first.
		ended = int(op.in.Attempt)
	}
	return activities.HostOpOutput{Result: proc.Fail(proc.CodeCancelled, "cancelled while running: %s; %s",
		what, h.stateAfter(ctx, op, ended))}, nil
}

// awaitTakingCancels waits until fut (an attempt's activity, or the wait
// before the next) is ready, taking cancels meanwhile; the first that
// covers req calls cancel, which ends what fut waits on. It reports whether
// one did.
func (h *host) awaitTakingCancels(ctx workflow.Context, req HostRequest, fut workflow.Future, cancel workflow.CancelFunc) bool {
	cancelled := false
	for done := false; !done; {
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(fut, func(workflow.Future) { done = true })
		sel.AddReceive(h.cancels, func(c workflow.ReceiveChannel, _ bool) {
			var t string
			c.Receive(ctx, &t)
			if h.cancelTask(ctx, t) && cancels(t, req) && !cancelled {
				cancelled = true
				cancel()
			}
		})
		sel.Select(ctx)
	}
	return cancelled
}

// stateAfter probes the process after a cancelled op, so the answer says
// what the host was left with. The probe first ends what the op's first
// ended attempts noted and may have left running.
func (h *host) stateAfter(ctx workflow.Context, op *taskOp, ended int) string {
	spec := policies.WithDefaults(op.e.Spec)
	spec.OpTimeout = policies.StatusProbeTimeout(spec.OpTimeout)
	in := activities.HostOpInput{
		RequestID: op.req.RequestID + "/probe", Op: proc.OpStatus, Target: op.req.Target, Process: op.req.Process, Spec: spec,
		Registration: op.e.Registration,
	}
	if ended > 0 {
		in.EndRequestID, in.EndAttempts = op.req.RequestID, int32(ended)
	}
	var out activities.HostOpOutput
	var err error
	if op.local {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: min(policies.LocalOpBudget, policies.HostOpDeadline(proc.OpStatus, spec)),
			RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2},
		})
		err = workflow.ExecuteLocalActivity(lctx, HostOpActivity, in).Get(ctx, &out)
	} else {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: policies.HostOpDeadline(proc.OpStatus, spec),
			HeartbeatTimeout:    policies.HeartbeatTimeout,
			RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2},
		})
		err = workflow.ExecuteActivity(actx, HostOpActivity, in).Get(ctx, &out)
	}
	switch {
	case err != nil:
		return "the process could not be probed after: " + oneLine(err.Error())
	case out.Result.Code == proc.CodeSuccess:
		return fmt.Sprintf("process %s is running", spec.ProcName)
	case out.Result.Code == proc.CodeNotRunning:
		return fmt.Sprintf("process %s is not running", spec.ProcName)
	}
	return "the process could not be probed after: " + out.Result.Message
}
