package workflows

// A task of more than ChunkSize items that holds its items runs them as
// child Operate workflows of at most ChunkSize items each. The client never
// starts one: it splits such a task itself (internal/engine, and
// runSplit). Two kinds of task get here: tasks begun before the client
// split them, and tasks started directly through Temporal's API (a
// workflow start of type Operate with every item in its input), which
// drover supports (docs/operating.md, Starting a task without drover's
// client). A direct status task takes this path only past
// VersionChunkedStatus; before it, it ran as one workflow (runStatus).

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// runChunks splits a large task into child Operate workflows of at most
// ChunkSize items, so each history stays small.
func (op *operation) runChunks(ctx workflow.Context) {
	self := workflow.GetInfo(ctx).WorkflowExecution.ID
	var futs []workflow.ChildWorkflowFuture
	for start := 0; start < len(op.in.Items); start += policies.ChunkSize {
		end := min(start+policies.ChunkSize, len(op.in.Items))
		id := fmt.Sprintf("%s/chunk-%d", self, len(op.chunks))
		op.chunks = append(op.chunks, id)
		op.chunkCounts = append(op.chunkCounts, ChunkCounts{ID: id, Total: end - start})
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: id})
		futs = append(futs, workflow.ExecuteChildWorkflow(cctx, Operate, OperateInput{
			TaskID: op.in.TaskID, Op: op.in.Op, Manage: op.in.Manage,
			Items: op.in.Items[start:end], Offset: op.in.Offset + start, Files: op.in.Files,
		}))
	}
	cancels := workflow.GetSignalChannel(ctx, CancelSignal)
	for n, f := range futs {
		for !f.IsReady() {
			sel := workflow.NewSelector(ctx)
			sel.AddFuture(f, func(workflow.Future) {})
			sel.AddReceive(cancels, func(c workflow.ReceiveChannel, _ bool) {
				c.Receive(ctx, nil)
				op.cancelChunks(ctx, futs[n:])
			})
			sel.Select(ctx)
		}
		var res OperateResult
		start := n * policies.ChunkSize
		if err := f.Get(ctx, &res); err != nil {
			for i := start; i < min(start+policies.ChunkSize, len(op.results)); i++ {
				op.results[i] = proc.HostResult{Code: proc.CodeInternal, Message: oneLine(fmt.Sprintf("chunk %s failed: %v", op.chunks[n], err))}
			}
			op.done += min(policies.ChunkSize, len(op.results)-start)
			c := &op.chunkCounts[n]
			c.Done, c.Failed, c.Finished, c.Error = c.Total, c.Total, true, oneLine(err.Error())
			continue
		}
		op.done += res.Done
		c := &op.chunkCounts[n]
		c.Done, c.Failed, c.Finished = res.Done, proc.CountFailed(res.Results), true
		// Kept for the task's outcome; the parent's own result still
		// lists only its chunks.
		for i, r := range res.Results {
			if start+i < len(op.results) {
				op.results[start+i] = r.HostResult
			}
		}
	}
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
