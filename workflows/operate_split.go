package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"golang.org/x/sync/errgroup"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// A task of more than ChunkSize items is split by the client, not by the
// task's workflow: a workflow input holding every item (an inline spec
// each, for operate_proc) passes the server's 2 MB payload limit well
// before 10,000 hosts, and child workflows would bring every chunk's input
// and result back into the task's own history. So the client starts one
// Operate workflow per ChunkSize items, <task id>/chunk-N, then the task
// itself with only the count of items and chunks. The task waits for each
// chunk with an activity and keeps its counts, never its results; readers
// page through the chunks (FetchOperate).

// chunkStartParallel bounds the chunk starts in flight for one task.
const chunkStartParallel = 8

// SplitChunkID names chunk n of a split task, as child chunks were named,
// so every reader of chunks treats both alike.
func SplitChunkID(taskID string, n int) string { return fmt.Sprintf("%s/chunk-%d", taskID, n) }

// splitTask starts a task of more than ChunkSize items: its chunks first,
// each with at most ChunkSize items, then the task. The task id is known to
// nobody until the task starts, so a cancel always finds every chunk
// started. A chunk already started (a retried submission) is kept.
func splitTask(ctx context.Context, c client.Client, taskQueue string, in OperateInput, memo map[string]any) error {
	n := (len(in.Items) + policies.ChunkSize - 1) / policies.ChunkSize
	var g errgroup.Group
	g.SetLimit(chunkStartParallel)
	for k := 0; k < n; k++ {
		start := k * policies.ChunkSize
		chunk := OperateInput{TaskID: in.TaskID, Op: in.Op, Manage: in.Manage, Files: in.Files,
			Items: in.Items[start:min(start+policies.ChunkSize, len(in.Items))], Offset: start, Total: len(in.Items)}
		g.Go(func() error {
			_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: SplitChunkID(in.TaskID, k), TaskQueue: taskQueue,
				WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			}, OperateWorkflowName, chunk)
			if alreadyStarted(err) {
				return nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("start the chunks of %s: %w", in.TaskID, err)
	}
	task := OperateInput{TaskID: in.TaskID, Op: in.Op, Manage: in.Manage, Files: in.Files, Split: n, Total: len(in.Items)}
	indexed := task
	indexed.Indexed = true
	opts := client.StartWorkflowOptions{
		ID: in.TaskID, TaskQueue: taskQueue, Memo: memo,
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
	// The attributes are read from every item here, where they are.
	return startIndexed(ctx, c, opts, taskSearchAttributes(in), OperateWorkflowName, indexed, task)
}

// runSplit waits for every chunk the client started, at most MaxInFlight
// waits at a time, and forwards a cancel of the task to each chunk still
// running.
func (op *operation) runSplit(ctx workflow.Context) {
	for k := 0; k < op.in.Split; k++ {
		id := SplitChunkID(op.in.TaskID, k)
		op.chunks = append(op.chunks, id)
		op.chunkCounts = append(op.chunkCounts, ChunkCounts{ID: id, Total: min(policies.ChunkSize, op.in.Total-k*policies.ChunkSize)})
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// A chunk ends by its own backstop; its wait outlasts it.
		StartToCloseTimeout: policies.TaskBackstop + 30*time.Minute,
		HeartbeatTimeout:    policies.HeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute, NonRetryableErrorTypes: []string{ErrChunkNotFound}},
	})
	cancels := workflow.GetSignalChannel(ctx, CancelSignal)
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(cancels, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		op.cancelSplit(ctx)
	})
	pending := 0
	wait := func() {
		for before := pending; pending == before; {
			sel.Select(ctx)
		}
	}
	for k := range op.chunkCounts {
		if pending >= policies.MaxInFlight {
			wait()
		}
		fut := workflow.ExecuteActivity(actx, AwaitChunkActivity, AwaitChunkInput{ID: op.chunks[k], Total: op.chunkCounts[k].Total})
		pending++
		sel.AddFuture(fut, func(f workflow.Future) {
			pending--
			c := &op.chunkCounts[k]
			var got ChunkCounts
			if err := f.Get(ctx, &got); err != nil {
				c.Done, c.Failed, c.Error = c.Total, c.Total, oneLine(err.Error())
			} else {
				c.Done, c.Failed, c.Error = got.Done, got.Failed, got.Error
			}
			c.Finished = true
			op.done += c.Done
		})
	}
	for pending > 0 {
		wait()
	}
}

// cancelSplit hands a cancel of the task to each chunk still running, by
// its workflow id; each chunk then cancels its items on their hosts.
func (op *operation) cancelSplit(ctx workflow.Context) {
	if op.cancelled {
		return
	}
	op.cancelled = true
	var sent []workflow.Future
	for _, c := range op.chunkCounts {
		if !c.Finished {
			sent = append(sent, workflow.SignalExternalWorkflow(ctx, c.ID, "", CancelSignal, nil))
		}
	}
	for _, f := range sent {
		// A chunk that closed meanwhile has nothing left to cancel.
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Info("cancel not delivered to a chunk", "task", op.in.TaskID, "error", err)
		}
	}
}

// countsOf counts a closed task's results.
func countsOf(res OperateResult) Counts {
	if len(res.Chunks) > 0 {
		return Counts{Total: res.Total, Done: res.Done, Failed: res.Failed}
	}
	return Counts{Total: res.Total, Done: res.Done, Failed: proc.CountFailed(res.Results)}
}

// countsWait bounds one counts query: a chunk's query waits behind every
// workflow task queued before it on the worker, which in a large fan-out
// can be thousands of host ops; progress then shows that chunk as it last
// was rather than wait.
const countsWait = 5 * time.Second

// ErrCountsLate means the task did not answer its counts query (in time):
// its workflow is queued behind others, and asking again later will do.
var ErrCountsLate = errors.New("the task did not answer its counts in time")

// TaskCounts is a task's progress in numbers: the task's counts, and
// those of each chunk still running asked of the chunk itself. No host's
// result is read while the task runs. A chunk that does not answer in
// countsWait counts as the task last counted it. A task on a worker that
// predates the counts query is counted from its results.
func TaskCounts(ctx context.Context, c client.Client, taskID string) (Counts, error) {
	var cnt Counts
	qctx, cancel := context.WithTimeout(ctx, countsWait)
	found, err := QueryOpen(qctx, c, taskID, CountsQuery, &cnt)
	cancel()
	if err != nil {
		var qf *serviceerror.QueryFailed
		switch {
		case ctx.Err() != nil:
			return Counts{}, err
		case !errors.As(err, &qf):
			// Timed out, or refused while every poller of a busy worker
			// was taken ("no poller seen"): asking again later will do.
			return Counts{}, fmt.Errorf("%w: %v", ErrCountsLate, err)
		}
		res, err := FetchOperate(ctx, c, taskID)
		if err != nil {
			return Counts{}, err
		}
		return Counts{Total: res.Total, Done: res.Done, Failed: proc.CountFailed(res.Results)}, nil
	}
	if !found {
		res, err := fetchOne(ctx, c, taskID)
		if err != nil {
			return Counts{}, err
		}
		return countsOf(res), nil
	}
	for i := range cnt.Chunks {
		ch := &cnt.Chunks[i]
		if ch.Finished {
			continue
		}
		var part Counts
		qctx, cancel := context.WithTimeout(ctx, countsWait)
		found, err := QueryOpen(qctx, c, ch.ID, CountsQuery, &part)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			continue // as for the task: asked again at the next call
		case err != nil:
			return Counts{}, err
		case !found:
			// Closed since the task counted it, or (a child chunk)
			// not started yet.
			res, err := fetchOne(ctx, c, ch.ID)
			if errors.Is(err, ErrTaskNotFound) {
				continue
			}
			if err != nil {
				return Counts{}, err
			}
			part = countsOf(res)
		}
		ch.Done, ch.Failed = part.Done, part.Failed
		cnt.Done += part.Done
		cnt.Failed += part.Failed
	}
	return cnt, nil
}

// alreadyStarted reports whether a start was refused because a workflow
// with that id exists.
func alreadyStarted(err error) bool {
	var as *serviceerror.WorkflowExecutionAlreadyStarted
	return errors.As(err, &as)
}
