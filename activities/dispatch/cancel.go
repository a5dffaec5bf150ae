package dispatch

import (
	"context"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/drover-sh/drover/internal/hostloss"
	"github.com/drover-sh/drover/workflows"
)

// CancelHosts signals each host workflow a cancel. A host without a
// workflow yet gets one holding the cancel: the task may still be handing
// it an item, which it then answers "not run". One with a closed workflow
// runs nothing anyway.
func (d *Dispatcher) CancelHosts(ctx context.Context, in workflows.CancelHostsInput) error {
	var g errgroup.Group
	g.SetLimit(dispatchParallel)
	for i, c := range in.Cancels {
		g.Go(func() error {
			_, err := d.Client.SignalWithStartWorkflow(ctx, workflows.HostWorkflowID(c.Host), workflows.CancelTaskSignal, c.ID, client.StartWorkflowOptions{
				ID: workflows.HostWorkflowID(c.Host), TaskQueue: d.TaskQueue,
				WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			}, workflows.HostWorkflowName, workflows.NewHostState(c.Host, d.Supervision))
			if hostloss.AlreadyStarted(err) {
				return nil
			}
			return err
		})
		if i%100 == 0 {
			activity.RecordHeartbeat(ctx, i)
		}
	}
	return g.Wait()
}
