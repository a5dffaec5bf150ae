package dispatch

import (
	"context"
	"errors"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/workflows"
)

// HostLink is how shard watches reach host workflows
// (activities.HostWorkflows).
type HostLink struct{ Client client.Client }

// WatchInput asks a host workflow what it armed its shard with.
func (l HostLink) WatchInput(ctx context.Context, host string) (activities.HostWatch, bool, error) {
	var w activities.HostWatch
	found, err := engine.QueryOpen(ctx, l.Client, host, workflows.WatchInputQuery, &w)
	return w, found, err
}

// Report tells a host workflow what its shard watch saw, by update: one
// the host no longer watches for (an op changed what it watches since)
// is refused by the host's validator, which writes nothing, where a
// signal cost a workflow task. A host whose worker does not know the
// update (an older one, mid-deploy) is signalled.
func (l HostLink) Report(ctx context.Context, host string, ev activities.ShardEvents) (bool, error) {
	h, err := l.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: host, UpdateName: workflows.WatchEventsUpdate,
		Args: []any{ev}, WaitForStage: client.WorkflowUpdateStageAccepted})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	var nf *serviceerror.NotFound
	var ae *temporal.ApplicationError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &nf):
		return false, nil
	case errors.As(err, &ae) && ae.Type() == workflows.ErrStaleWatchEvents:
		return true, nil
	case errors.As(err, &ae):
		err = l.Client.SignalWorkflow(ctx, host, "", workflows.WatchEventsSignal, ev)
		if errors.As(err, &nf) {
			return false, nil
		}
	}
	return err == nil, err
}
