package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// RolloutChunkWorkflowName records a slice of a rollout's final results.

// rolloutChunk is up to ChunkSize items of one batch: its Operate child
// runs them (ID + "/op"), and a RolloutChunk workflow under ID holds
// their final results, health gate and "not run" included, for
// get_proc_operate_result to read after the rollout.
type rolloutChunk struct {
	ID         string
	Batch      int // 1-based
	Start, End int
	recorded   bool
}

// planChunks lays out every batch's chunks up front, so the rollout's
// result names them all from its start.
func planChunks(self string, sizes []int) []rolloutChunk {
	var out []rolloutChunk
	start := 0
	for b, n := range sizes {
		end := start + n
		for s := start; s < end; s += policies.ChunkSize {
			id := fmt.Sprintf("%s/batch-%d", self, b+1)
			if n > policies.ChunkSize {
				id = fmt.Sprintf("%s-%d", id, (s-start)/policies.ChunkSize)
			}
			out = append(out, rolloutChunk{ID: id, Batch: b + 1, Start: s, End: min(s+policies.ChunkSize, end)})
		}
		start = end
	}
	return out
}

// RolloutChunkInput is one chunk's final results.
type RolloutChunkInput struct {
	TaskID  string        `json:"task_id"`
	Results []KeyedResult `json:"results"`
}

// RolloutChunk holds a chunk's final results as its own result.
func RolloutChunk(ctx workflow.Context, in RolloutChunkInput) (OperateResult, error) {
	out := OperateResult{TaskID: in.TaskID, Done: len(in.Results), Total: len(in.Results), Results: in.Results}
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (OperateResult, error) { return out, nil }); err != nil {
		return OperateResult{}, err
	}
	return out, nil
}

// record writes the final results of the chunks keep picks and not yet
// recorded, each in its RolloutChunk workflow, and waits for them.
func (ro *rollout) record(ctx workflow.Context, keep func(rolloutChunk) bool) {
	var futs []workflow.ChildWorkflowFuture
	for i := range ro.chunks {
		c := &ro.chunks[i]
		if c.recorded || !keep(*c) {
			continue
		}
		c.recorded = true
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: c.ID})
		futs = append(futs, workflow.ExecuteChildWorkflow(cctx, RolloutChunk, RolloutChunkInput{TaskID: ro.in.TaskID, Results: ro.keyed(c.Start, c.End)}))
	}
	for _, f := range futs {
		_ = f.Get(ctx, nil) // it only returns its input
	}
}

// chunkResults is chunk n's results as the rollout has them now.
func (ro *rollout) chunkResults(n int) []KeyedResult {
	if n < 0 || n >= len(ro.chunks) {
		return nil
	}
	return ro.keyed(ro.chunks[n].Start, ro.chunks[n].End)
}

func (ro *rollout) keyed(start, end int) []KeyedResult {
	out := make([]KeyedResult, 0, end-start)
	for i := start; i < end; i++ {
		it := ro.in.Items[i]
		out = append(out, KeyedResult{Key: it.Key(), AgentID: it.Target.AgentID, HostResult: ro.results[i]})
	}
	return out
}

// pendingResults marks every item pending, for a rollout's start.
func pendingResults(n int) []proc.HostResult {
	out := make([]proc.HostResult, n)
	for i := range out {
		out[i] = proc.Pending()
	}
	return out
}
