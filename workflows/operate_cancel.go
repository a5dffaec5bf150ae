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
