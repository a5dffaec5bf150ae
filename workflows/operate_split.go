package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/policies"
)

// A task of more than ChunkSize items is split by the client, not by the
// task's workflow: a workflow input holding every item (an inline spec
// each, for operate_proc) passes the server's 2 MB payload limit well
// before 10,000 hosts, and child workflows would bring every chunk's input
// and result back into the task's own history. So the client starts one
// Operate workflow per ChunkSize items, <task id>/chunk-N, then the task
// itself with only the count of items and chunks (internal/engine). The task waits for each
// chunk with an activity and keeps its counts, never its results; readers
// page through the chunks (engine.FetchOperate).

// SplitChunkID names chunk n of a split task, as child chunks were named,
// so every reader of chunks treats both alike.
func SplitChunkID(taskID string, n int) string { return fmt.Sprintf("%s/chunk-%d", taskID, n) }

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
		// A wait only reads the engine, as a batch does: at 10,000
		// identities a loaded server took its heartbeats late, timed out
		// waits that worked, and their retries' backoff left the task idle
		// for up to a minute after its last chunk closed.
		HeartbeatTimeout:      policies.BatchHeartbeatTimeout,
		RetryPolicy:           &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute, NonRetryableErrorTypes: []string{ErrChunkNotFound}},
		DisableEagerExecution: true, // as batchOptions says
	})
	cancels := workflow.GetSignalChannel(ctx, CancelSignal)
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(cancels, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		op.cancelSplit(ctx)
	})
	// open counts the chunks not yet finished, by their signal or their
	// wait's end; waiting the waits in flight.
	open, waiting := len(op.chunkCounts), 0
	finish := func(k int, got ChunkCounts) {
		c := &op.chunkCounts[k]
		if c.Finished {
			return
		}
		c.Done, c.Failed, c.Error, c.Finished = got.Done, got.Failed, got.Error, true
		op.done += c.Done
		open--
	}
	if workflow.GetVersion(ctx, VersionChunksTellTask, workflow.DefaultVersion, 1) >= 1 {
		sel.AddReceive(workflow.GetSignalChannel(ctx, ChunkEndedSignal), func(c workflow.ReceiveChannel, _ bool) {
			var got ChunkCounts
			c.Receive(ctx, &got)
			if k := slices.Index(op.chunks, got.ID); k >= 0 {
				finish(k, got)
			}
		})
	}
	for k := range op.chunkCounts {
		for waiting >= policies.MaxInFlight {
			sel.Select(ctx)
		}
		if op.chunkCounts[k].Finished {
			continue
		}
		fut := workflow.ExecuteActivity(actx, AwaitChunkActivity, AwaitChunkInput{ID: op.chunks[k], Total: op.chunkCounts[k].Total})
		waiting++
		sel.AddFuture(fut, func(f workflow.Future) {
			waiting--
			var got ChunkCounts
			if err := f.Get(ctx, &got); err != nil {
				got = ChunkCounts{Done: op.chunkCounts[k].Total, Failed: op.chunkCounts[k].Total, Error: oneLine(err.Error())}
			}
			finish(k, got)
		})
	}
	for open > 0 {
		sel.Select(ctx)
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
