package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/drover-sh/drover/internal/hostloss"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// A task of more than policies.ChunkSize items is split here, by the
// client, never by its workflow (workflows/operate_split.go says why): its
// chunks start first, <task id>/chunk-N, then the task itself with only
// the count of items and chunks.

// chunkStartParallel bounds the chunk starts in flight for one task.
const chunkStartParallel = 8

// splitTask starts a task of more than ChunkSize items: its chunks first,
// each with at most ChunkSize items, then the task. The task id is known to
// nobody until the task starts, so a cancel always finds every chunk
// started. A chunk already started (a retried submission) is kept.
func splitTask(ctx context.Context, c client.Client, taskQueue string, in workflows.OperateInput, memo map[string]any) error {
	n := (len(in.Items) + policies.ChunkSize - 1) / policies.ChunkSize
	var g errgroup.Group
	g.SetLimit(chunkStartParallel)
	for k := 0; k < n; k++ {
		start := k * policies.ChunkSize
		chunk := workflows.OperateInput{TaskID: in.TaskID, Op: in.Op, Manage: in.Manage, Files: in.Files,
			Items: in.Items[start:min(start+policies.ChunkSize, len(in.Items))], Offset: start, Total: len(in.Items)}
		g.Go(func() error {
			return whileBusy(ctx, func(ctx context.Context) error {
				_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
					ID: workflows.SplitChunkID(in.TaskID, k), TaskQueue: taskQueue,
					WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
				}, workflows.OperateWorkflowName, chunk)
				if hostloss.AlreadyStarted(err) {
					return nil
				}
				return err
			})
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("start the chunks of %s: %w", in.TaskID, err)
	}
	task := workflows.OperateInput{TaskID: in.TaskID, Op: in.Op, Manage: in.Manage, Files: in.Files, Split: n, Total: len(in.Items)}
	indexed := task
	indexed.Indexed = true
	opts := client.StartWorkflowOptions{
		ID: in.TaskID, TaskQueue: taskQueue, Memo: memo,
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
	// The attributes are read from every item here, where they are.
	return startIndexed(ctx, c, opts, taskSearchAttributes(in), workflows.OperateWorkflowName, indexed, task)
}

// countsOf counts a closed task's results.
func countsOf(res workflows.OperateResult) workflows.Counts {
	if len(res.Chunks) > 0 {
		return workflows.Counts{Total: res.Total, Done: res.Done, Failed: res.Failed}
	}
	return workflows.Counts{Total: res.Total, Done: res.Done, Failed: proc.CountFailed(res.Results)}
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
func TaskCounts(ctx context.Context, c client.Client, taskID string) (workflows.Counts, error) {
	var cnt workflows.Counts
	qctx, cancel := context.WithTimeout(ctx, countsWait)
	found, err := QueryOpen(qctx, c, taskID, workflows.CountsQuery, &cnt)
	cancel()
	if err != nil {
		var qf *serviceerror.QueryFailed
		switch {
		case ctx.Err() != nil:
			return workflows.Counts{}, err
		case !errors.As(err, &qf):
			// Timed out, or refused while every poller of a busy worker
			// was taken ("no poller seen"): asking again later will do.
			return workflows.Counts{}, fmt.Errorf("%w: %v", ErrCountsLate, err)
		}
		res, err := FetchOperate(ctx, c, taskID)
		if err != nil {
			return workflows.Counts{}, err
		}
		return workflows.Counts{Total: res.Total, Done: res.Done, Failed: proc.CountFailed(res.Results)}, nil
	}
	if !found {
		res, err := fetchOne(ctx, c, taskID)
		if err != nil {
			return workflows.Counts{}, err
		}
		return countsOf(res), nil
	}
	for i := range cnt.Chunks {
		ch := &cnt.Chunks[i]
		if ch.Finished {
			continue
		}
		var part workflows.Counts
		qctx, cancel := context.WithTimeout(ctx, countsWait)
		found, err := QueryOpen(qctx, c, ch.ID, workflows.CountsQuery, &part)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			continue // as for the task: asked again at the next call
		case err != nil:
			return workflows.Counts{}, err
		case !found:
			// Closed since the task counted it, or (a child chunk)
			// not started yet.
			res, err := fetchOne(ctx, c, ch.ID)
			if errors.Is(err, ErrTaskNotFound) {
				continue
			}
			if err != nil {
				return workflows.Counts{}, err
			}
			part = countsOf(res)
		}
		ch.Done, ch.Failed = part.Done, part.Failed
		cnt.Done += part.Done
		cnt.Failed += part.Failed
	}
	return cnt, nil
}
