package dispatch

import (
	"context"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/internal/hostloss"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// deliverSlots bounds the updates one worker has in flight, whatever the
// batches: each is a host op a worker runs, and more only queue.
var deliverSlots = make(chan struct{}, policies.DeliverInFlight)

// Deliver hands each item to its host's workflow by update and returns
// every host's answer. A host's items go one after another, as its
// workflow runs them; hosts go side by side. Answers reach the task as
// they come, through its outbox (one AnswersSignal for the task's batches
// on this worker at most once per policies.DeliverReportEvery), so its
// progress is per host, not per batch. It returns nothing unless
// it has every answer: a batch given up (its context ended) is retried
// whole, and an update sent again is answered from what its host kept,
// never run twice.
func (d *Dispatcher) Deliver(ctx context.Context, in workflows.DeliverInput) ([]workflows.HostReply, error) {
	ctx, outlast := activities.OutlastLostHeartbeats(ctx)
	defer outlast()
	defer activities.KeepAlive(ctx)()
	// A stopping worker hands the wait back: the host workflows that would
	// answer may run on this worker, and a retry's updates are answered
	// from what the hosts kept.
	ctx, _, release := activities.StopOnWorkerStop(ctx)
	defer release()
	out := make([]workflows.HostReply, len(in.Items))
	box := d.joinOutbox(activity.GetInfo(ctx).WorkflowExecution)
	defer box.close(ctx)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(policies.DeliverParallel)
	// Batches of one host each.
	for _, idx := range policies.HostBatches(in.Items, 1) {
		g.Go(func() error {
			for _, i := range idx {
				res, err := d.deliverOne(gctx, in, i)
				if err != nil {
					return err
				}
				out[i] = workflows.HostReply{Index: in.Indexes[i], Result: res}
				box.add(out[i])
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			err = activities.Ended(ctx)
		}
		return nil, err
	}
	return out, nil
}

// deliverOne hands item i to its host and waits for its answer. An error
// is the engine's, never the host's: the batch is tried again.
func (d *Dispatcher) deliverOne(ctx context.Context, in workflows.DeliverInput, i int) (proc.HostResult, error) {
	it := in.Items[i]
	h, ok := d.Inventory.Lookup(it.Target.HostID())
	if !ok {
		return unknownHost(it.Target), nil
	}
	req := workflows.HostRequest{
		RequestID: workflows.RequestID(in.TaskID, in.Indexes[i]), TaskID: in.TaskID, Index: in.Indexes[i],
		Op: in.Op, Target: it.Target, Process: it.Process, Spec: it.Spec, Manage: in.Manage,
		Supervision: &d.Supervision, Files: in.Files, Deadline: in.Deadlines[i],
	}
	// Its connection's slot first: an item waiting on a busy connection
	// holds none of the worker's. A registry op runs nothing on its host.
	sessions := d.SessionsPerHost
	if in.Op.IsSpecOp() {
		sessions = 0
	}
	leave, err := d.conns.enter(ctx, h, sessions)
	if err != nil {
		return proc.HostResult{}, err
	}
	defer leave()
	select {
	case deliverSlots <- struct{}{}:
	case <-ctx.Done():
		return proc.HostResult{}, ctx.Err()
	}
	defer func() { <-deliverSlots }()
	for wait, tries := policies.DeliverRetryFirst, 1; ; wait, tries = min(2*wait, policies.DeliverRetryMax), tries+1 {
		res, err := d.update(ctx, it.Target.HostID(), req)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return proc.HostResult{}, ctx.Err()
		}
		// What keeps a batch from its answers on a loaded server.
		logTry(ctx, tries, "the engine did not answer a host's update; sending it again", "host", it.Target.HostID().String(), "error", err)
		// A host workflow that is closed answers that, and runs nothing.
		if lost, derr := hostloss.Closed(ctx, d.Client, it.Target.HostID()); derr == nil && lost != nil {
			return *lost, nil
		}
		if policies.Passed(req.Deadline.Add(policies.DeliverGrace), time.Now()) {
			// The engine could not take the request in time: its host,
			// should it get it later, refuses it as too late.
			return proc.Fail(proc.CodeTimeout, "not run: deadline passed (it had to start by %s; the engine did not hand it to the host: %s)",
				req.Deadline.UTC().Format(time.RFC3339), oneLine(err.Error())), nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return proc.HostResult{}, ctx.Err()
		case <-t.C:
		}
	}
}

// update sends req to its host's workflow, starting the workflow if the
// host has none, and waits for the op's answer.
func (d *Dispatcher) update(ctx context.Context, id proc.HostID, req workflows.HostRequest) (proc.HostResult, error) {
	start := d.Client.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: workflows.HostWorkflowID(id), TaskQueue: d.TaskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// A closed host workflow is never replaced (see internal/hostloss).
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, workflows.HostWorkflowName, workflows.NewHostState(id, d.Supervision))
	h, err := d.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateID: req.RequestID, UpdateName: workflows.OpUpdate, Args: []any{req},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	var res proc.HostResult
	if err == nil {
		err = h.Get(ctx, &res)
	}
	return res, err
}

// logTry logs a try the engine did not take, the first and every tenth:
// a loaded server fails thousands.
func logTry(ctx context.Context, tries int, msg string, kv ...any) {
	if tries == 1 || tries%10 == 0 {
		logWarn(ctx, msg, append(kv, "tries", tries)...)
	}
}

// logWarn logs through the activity's logger, when there is one.
func logWarn(ctx context.Context, msg string, kv ...any) {
	if activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Warn(msg, kv...)
	}
}
