package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// cancelOnHosts hands cancels to the hosts and waits until they have them.
func (op *operation) cancelOnHosts(ctx workflow.Context, cancels []HostCancel) error {
	if len(cancels) == 0 {
		return nil
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    policies.HeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	return workflow.ExecuteActivity(actx, CancelHostsActivity, CancelHostsInput{Cancels: cancels}).Get(ctx, nil)
}

// cancel cancels the task on every host it has items on; the hosts then
// answer every item. It reports false when the history predates cancels.
func (op *operation) cancel(ctx workflow.Context) bool {
	if op.cancelled || workflow.GetVersion(ctx, VersionCancelTask, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	op.cancelled = true
	var cancels []HostCancel
	seen := map[proc.HostID]bool{}
	for i, it := range op.in.Items {
		h := it.Target.HostID()
		if seen[h] || op.results[i].Code != proc.CodeRunning || !it.Target.Resolved() {
			continue
		}
		seen[h] = true
		cancels = append(cancels, HostCancel{Host: h, ID: op.in.TaskID})
	}
	if err := op.cancelOnHosts(ctx, cancels); err != nil {
		workflow.GetLogger(ctx).Warn("cancel could not reach every host", "task", op.in.TaskID, "error", err)
	}
	return true
}

// undelivered answers items Dispatch could not be sure it handed over.
// Each may have reached its host, so it is cancelled there, by its own
// request id, before it is reported: a host then drops it whenever it
// arrives. The hosts answer those that did arrive; until the items'
// deadlines pass (a request not started by then never runs) the task
// waits for those answers, and the rest are answered 9199, not run.
func (op *operation) undelivered(ctx workflow.Context, items []int, issued time.Time, why string) {
	if len(items) == 0 {
		return
	}
	if workflow.GetVersion(ctx, VersionCancelTask, workflow.DefaultVersion, 1) < 1 {
		for _, i := range items {
			op.set(i, proc.HostResult{Code: proc.CodeInternal, Message: why})
		}
		return
	}
	deadlines := policies.TaskDeadlines(issued, op.in.Op, op.in.Items, op.in.Total)
	var latest time.Time
	var cancels []HostCancel
	for _, i := range items {
		it := op.in.Items[i]
		cancels = append(cancels, HostCancel{Host: it.Target.HostID(), ID: RequestID(op.in.TaskID, op.in.Offset+i)})
		if deadlines[i].After(latest) {
			latest = deadlines[i]
		}
	}
	if err := op.cancelOnHosts(ctx, cancels); err != nil {
		workflow.GetLogger(ctx).Warn("cancel of undelivered items could not reach every host", "task", op.in.TaskID, "error", err)
	}
	waiting := func() bool {
		for _, i := range items {
			if op.results[i].Code == proc.CodeRunning {
				return true
			}
		}
		return false
	}
	op.awaitReplies(ctx, max(latest.Sub(workflow.Now(ctx)), time.Second), waiting, func() {
		for _, i := range items {
			op.set(i, proc.HostResult{Code: proc.CodeInternal, Message: why + "; it was not run"})
		}
	})
}

// cancelChunks forwards a cancel of a task split into chunks to the chunks
// still running.
func (op *operation) cancelChunks(ctx workflow.Context, futs []workflow.ChildWorkflowFuture) {
	if op.cancelled || workflow.GetVersion(ctx, VersionCancelTask, workflow.DefaultVersion, 1) < 1 {
		return
	}
	op.cancelled = true
	for _, f := range futs {
		if !f.IsReady() {
			f.SignalChildWorkflow(ctx, CancelSignal, nil)
		}
	}
}
