package dispatch

// Only tasks begun before workflows.VersionDeliverUpdates schedule the
// Dispatch activity (workflows/old_operate.go): it signals each item to its
// host, which signals its answer back. It may go once every such task has
// ended (within policies.TaskBackstop of the deploy that brought Deliver)
// and the version is pinned (docs/upgrades.md, Retiring an old branch).

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/drover-sh/drover/internal/hostloss"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// Dispatch signals each item's host workflow, starting it if needed. It is
// safe to retry: host workflows drop a request id they have seen.
func (d *Dispatcher) Dispatch(ctx context.Context, in workflows.DispatchInput) (workflows.DispatchOutput, error) {
	var out workflows.DispatchOutput
	var mu sync.Mutex
	var firstErr error
	var g errgroup.Group
	g.SetLimit(dispatchParallel)
	var deadlines []time.Time
	if !in.Issued.IsZero() {
		deadlines = policies.TaskDeadlines(in.Issued, in.Op, in.Items, in.TaskSize)
	}
	for i, it := range in.Items {
		global := in.Offset + i
		if _, ok := d.Inventory.Lookup(it.Target.HostID()); !ok {
			out.Answered = append(out.Answered, workflows.HostReply{Index: global, Result: unknownHost(it.Target)})
			continue
		}
		req := workflows.HostRequest{
			RequestID: workflows.RequestID(in.TaskID, global), TaskID: in.TaskID, ReplyTo: in.ReplyTo, Index: global,
			Op: in.Op, Target: it.Target, Process: it.Process, Spec: it.Spec, Manage: in.Manage,
			Supervision: &d.Supervision, Files: in.Files,
		}
		if deadlines != nil {
			req.Deadline = deadlines[i]
		}
		g.Go(func() error {
			lost, err := d.signal(ctx, it.Target.HostID(), req)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				if firstErr == nil {
					firstErr = err
				}
				out.Undelivered = append(out.Undelivered, i)
			case lost != nil:
				out.Answered = append(out.Answered, workflows.HostReply{Index: global, Result: *lost})
			}
			return nil
		})
		if i%100 == 0 {
			activity.RecordHeartbeat(ctx, i)
		}
	}
	_ = g.Wait()
	// A transient failure is retried whole; duplicates are dropped by hosts.
	if firstErr != nil && activity.GetInfo(ctx).Attempt < 3 {
		return workflows.DispatchOutput{}, firstErr
	}
	return out, nil
}

// signal signals a request to its host's workflow, starting the workflow
// when the host has none yet. A closed one is never replaced (see
// internal/hostloss): the server refuses the start, and only then is the
// workflow described, so the common case costs one call. It returns the
// request's answer when the host workflow is closed.
func (d *Dispatcher) signal(ctx context.Context, id proc.HostID, req workflows.HostRequest) (*proc.HostResult, error) {
	// Twice at most: a workflow found running on the describe continued
	// as new, or was restored, between the two calls.
	for attempt := 0; ; attempt++ {
		_, err := d.Client.SignalWithStartWorkflow(ctx, workflows.HostWorkflowID(id), workflows.OpSignal, req, client.StartWorkflowOptions{
			ID: workflows.HostWorkflowID(id), TaskQueue: d.TaskQueue,
			WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		}, workflows.HostWorkflowName, workflows.NewHostState(id, d.Supervision))
		if !hostloss.AlreadyStarted(err) {
			return nil, err
		}
		lost, derr := hostloss.Closed(ctx, d.Client, id)
		if derr != nil || lost != nil || attempt == 1 {
			if derr == nil && lost == nil {
				derr = err
			}
			return lost, derr
		}
	}
}
