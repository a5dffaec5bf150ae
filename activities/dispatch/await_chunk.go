package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// AwaitChunk waits until a chunk workflow closes and returns its counts. A
// chunk that failed as a whole counts every item failed. A stopping worker
// hands the wait back, to be retried on another. Neither a long poll that
// a loaded server failed nor a heartbeat it did not take ends the wait: a
// retry would begin only after its backoff, however soon the chunk closed.
func (d *Dispatcher) AwaitChunk(ctx context.Context, in workflows.AwaitChunkInput) (workflows.ChunkCounts, error) {
	ctx, outlast := activities.OutlastLostHeartbeats(ctx)
	defer outlast()
	defer activities.KeepAlive(ctx)()
	ctx, _, release := activities.StopOnWorkerStop(ctx)
	defer release()
	for {
		// Each poll is bounded: a loaded server that misses telling a
		// long poll of the chunk's close answers it only at the poll's
		// end, and the task idled half a minute after its last chunk.
		var res workflows.OperateResult
		pctx, cancel := context.WithTimeout(ctx, awaitPollFor)
		err := d.Client.GetWorkflow(pctx, in.ID, "").Get(pctx, &res)
		cancel()
		if err == nil {
			return workflows.ChunkCounts{ID: in.ID, Total: in.Total, Done: res.Done, Failed: proc.CountFailed(res.Results), Finished: true}, nil
		}
		if ctx.Err() != nil {
			return workflows.ChunkCounts{}, activities.Ended(ctx)
		}
		if pctx.Err() != nil {
			continue
		}
		desc, derr := d.Client.DescribeWorkflowExecution(ctx, in.ID, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(derr, &nf):
			return workflows.ChunkCounts{}, temporal.NewNonRetryableApplicationError("chunk "+in.ID+" not found", workflows.ErrChunkNotFound, derr)
		case derr == nil && !stillOpen(desc.GetWorkflowExecutionInfo().GetStatus()):
			return workflows.ChunkCounts{ID: in.ID, Total: in.Total, Done: in.Total, Failed: in.Total, Finished: true,
				Error: oneLine(fmt.Sprintf("chunk %s ended %s: %v", in.ID, desc.GetWorkflowExecutionInfo().GetStatus(), err))}, nil
		}
		// A transient error: wait again.
		if sleepCtx(ctx, awaitAgainAfter) != nil {
			return workflows.ChunkCounts{}, activities.Ended(ctx)
		}
	}
}

// awaitAgainAfter spaces the waits of AwaitChunk on a server that fails
// them; awaitPollFor bounds each.
var (
	awaitAgainAfter = time.Second
	awaitPollFor    = 10 * time.Second
)

// stillOpen reports whether a chunk in status s may still complete: it
// runs, or it completed (its result read again), or continued as new.
func stillOpen(s enums.WorkflowExecutionStatus) bool {
	switch s {
	case enums.WORKFLOW_EXECUTION_STATUS_RUNNING, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return true
	}
	return false
}
