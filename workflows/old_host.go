package workflows

// Only histories begun before a change of the ledger reach the code in
// this file, each function naming its change. A Host change's branch may
// go once no host workflow is still on a run begun before it (a run takes
// the change when it continues as new on a worker that has it: when its
// history grows long, or at its next op after `worker setup --renew`); an
// Operate change's once every task begun before it has ended. Then the
// corpus histories that take the branch are replaced and the version
// pinned (docs/upgrades.md, Retiring an old branch).

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// replyBySignal answers a request a task signalled (OpSignal) with the
// task's ReplySignal. Only tasks begun before VersionDeliverUpdates
// signal requests (old_operate.go); a request sent by update is answered
// by the update.
func (h *host) replyBySignal(ctx workflow.Context, req HostRequest, res proc.HostResult) {
	h.publish(ctx)
	// The requester may be gone (terminated); that must not stop the host.
	_ = workflow.SignalExternalWorkflow(ctx, req.ReplyTo, "", ReplySignal, HostReply{Index: req.Index, Result: res}).Get(ctx, nil)
}

// runTaskOpWhole runs a task's op as one activity the server retries up to
// policies.OpAttempts times: a run begun before VersionTaskOpAttempts,
// which has the host make each attempt itself.
func (h *host) runTaskOpWhole(ctx workflow.Context, op *taskOp) activities.HostOpOutput {
	out, err := h.tryOp(ctx, op, policies.OpAttempts)
	if err != nil {
		out = activities.HostOpOutput{Result: activityFailure(err)}
	}
	return out
}

// startWatchOnOpsQueue starts the host's own watch on the ops' task queue,
// with the ops' heartbeat timeout: a run begun before VersionWatchQueue,
// which moved watches to a queue of their own.
func (h *host) startWatchOnOpsQueue(ctx workflow.Context, in activities.WatchInput) workflow.Future {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: policies.WatchRenew + 10*time.Minute,
		HeartbeatTimeout:    policies.HeartbeatTimeout,
		RetryPolicy:         watchRetryPolicy(),
	})
	return workflow.ExecuteActivity(actx, WatchActivity, in)
}
