package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// Actions a rollout takes by signal.
const (
	RolloutPause   = "pause"
	RolloutResume  = "resume"
	RolloutApprove = "approve"
	RolloutAbort   = "abort"
)

// RolloutActions lists the signal actions, for callers that check input.
var RolloutActions = []string{RolloutPause, RolloutResume, RolloutApprove, RolloutAbort}

// Rollout states, as its status and its DroverRolloutState attribute
// show them.
const (
	RolloutRunning         = "running"
	RolloutPaused          = "paused"
	RolloutWaitingApproval = "waiting_approval"
	RolloutAborted         = "aborted"
	RolloutFailed          = "failed" // stopped: more hosts failed than max_fail allows
	RolloutDone            = "done"
)

// RolloutInput is an op over items, run batch by batch.
type RolloutInput struct {
	OperateInput
	Rollout policies.Rollout `json:"rollout"`
}

// RolloutStatus is a rollout's state and counts.
type RolloutStatus struct {
	TaskID string `json:"task_id"`
	State  string `json:"state"`
	// Batch is the batch in progress or last run, 1-based; 0 before the first.
	Batch   int `json:"batch"`
	Batches int `json:"batches"`
	Total   int `json:"total"`
	Done    int `json:"done"`
	Failed  int `json:"failed"`
	NotRun  int `json:"not_run"`
}

// rollout is a Rollout workflow's state.
type rollout struct {
	in                                 RolloutInput
	results                            []proc.HostResult
	sizes                              []int
	chunks                             []rolloutChunk
	batch                              int // 1-based; 0 before the first
	paused, approved, aborted, waiting bool
	final                              string
	// published is the state and batch last put in the search attributes.
	published string
}

// Rollout runs an op over its items in batches: the canary first, then
// batches of rollout.batch hosts, each one the Operate op on its slice of
// items. It stops before the next batch once more hosts have failed than
// max_fail allows, or on abort; hosts it never reached answer 9111. A
// batch's hosts count as failed when their op fails, or when the process
// is not alive and healthy for min_healthy after it.
func Rollout(ctx workflow.Context, in RolloutInput) (OperateResult, error) {
	ro := &rollout{in: in, results: pendingResults(len(in.Items)), sizes: policies.Batches(len(in.Items), in.Rollout)}
	ro.published = fmt.Sprintf("%s/0", RolloutRunning) // as the task was started
	ro.chunks = planChunks(workflow.GetInfo(ctx).WorkflowExecution.ID, ro.sizes)
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (OperateResult, error) { return ro.snapshot(), nil }); err != nil {
		return OperateResult{}, err
	}
	// A chunk not recorded yet is answered from the rollout's own state,
	// so every key is answered from the first poll on.
	if err := workflow.SetQueryHandler(ctx, ChunkPendingQuery, func(n int) ([]KeyedResult, error) { return ro.chunkResults(n), nil }); err != nil {
		return OperateResult{}, err
	}
	if err := workflow.SetQueryHandler(ctx, RolloutStatusQuery, func() (RolloutStatus, error) { return ro.status(), nil }); err != nil {
		return OperateResult{}, err
	}
	signals := workflow.GetSignalChannel(ctx, RolloutSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var action string
			signals.Receive(ctx, &action)
			ro.act(action)
			ro.publish(ctx)
		}
	})
	for b := range ro.sizes {
		// A pause asked for during the last batch holds here.
		ro.publish(ctx)
		_ = workflow.Await(ctx, func() bool { return !ro.paused || ro.aborted })
		if ro.aborted {
			break
		}
		ro.batch = b + 1
		ro.publish(ctx)
		ro.runBatch(ctx)
		after := policies.AfterBatch(in.Rollout, b, len(ro.sizes), ro.failed(), len(in.Items))
		if after.Stop {
			ro.final = RolloutFailed
			break
		}
		if after.Done {
			ro.final = RolloutDone // every host ran, an abort sent meanwhile or not
			break
		}
		if after.WaitForApproval {
			ro.waiting = true
			ro.publish(ctx)
			_ = workflow.Await(ctx, func() bool { return ro.aborted || ro.approved })
			ro.waiting = false
		}
		if after.Pause > 0 && !ro.aborted {
			_, _ = workflow.AwaitWithTimeout(ctx, after.Pause, func() bool { return ro.aborted })
		}
	}
	why := "stopped past its max_fail"
	if ro.aborted && ro.final == "" {
		why = "aborted"
	}
	for i := range ro.results {
		if ro.results[i].Code == proc.CodeRunning {
			ro.results[i] = proc.Fail(proc.CodeNotRun, "not run: the rollout was %s before this host's batch", why)
		}
	}
	ro.record(ctx, func(rolloutChunk) bool { return true })
	switch {
	case ro.final != "":
	case ro.aborted:
		ro.final = RolloutAborted
	default:
		ro.final = RolloutDone
	}
	ro.publish(ctx)
	if in.Indexed {
		outcome, failed := outcomeOf(ro.results)
		_ = workflow.UpsertTypedSearchAttributes(ctx, SAOutcome.ValueSet(outcome), SAFailedHost.ValueSet(failed))
	}
	return ro.snapshot(), nil
}

// act applies one signal. Approval is remembered: one sent early is not
// lost. Unknown actions are ignored; callers check them before sending.
func (ro *rollout) act(action string) {
	switch action {
	case RolloutPause:
		ro.paused = true
	case RolloutResume:
		ro.paused = false
	case RolloutApprove:
		ro.approved = true
	case RolloutAbort:
		ro.aborted = true
	}
}

func (ro *rollout) state() string {
	switch {
	case ro.final != "":
		return ro.final
	case ro.aborted:
		return RolloutAborted
	case ro.paused:
		return RolloutPaused
	case ro.waiting:
		return RolloutWaitingApproval
	}
	return RolloutRunning
}

// publish puts the state and batch in the search attributes when they
// changed, for a task started with them.
func (ro *rollout) publish(ctx workflow.Context) {
	now := fmt.Sprintf("%s/%d", ro.state(), ro.batch)
	if !ro.in.Indexed || now == ro.published {
		return
	}
	ro.published = now
	_ = workflow.UpsertTypedSearchAttributes(ctx, SARolloutState.ValueSet(ro.state()), SARolloutBatch.ValueSet(int64(ro.batch)))
}

// runBatch runs the op on the batch's chunks as child Operate workflows,
// then holds the batch to its health gate and records its results.
func (ro *rollout) runBatch(ctx workflow.Context) {
	type part struct {
		c   rolloutChunk
		fut workflow.ChildWorkflowFuture
	}
	var parts []part
	start, end := -1, 0
	for _, c := range ro.chunks {
		if c.Batch != ro.batch {
			continue
		}
		if start < 0 {
			start = c.Start
		}
		end = c.End
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: c.ID + "/op"})
		parts = append(parts, part{c, workflow.ExecuteChildWorkflow(cctx, Operate, OperateInput{
			TaskID: ro.in.TaskID, Op: ro.in.Op, Manage: ro.in.Manage, Items: ro.in.Items[c.Start:c.End], Offset: ro.in.Offset + c.Start,
		})})
	}
	for _, p := range parts {
		var res OperateResult
		if err := p.fut.Get(ctx, &res); err != nil {
			for i := p.c.Start; i < p.c.End; i++ {
				ro.results[i] = proc.HostResult{Code: proc.CodeInternal, Message: oneLine(fmt.Sprintf("batch %d failed: %v", ro.batch, err))}
			}
			continue
		}
		for i, r := range res.Results {
			if p.c.Start+i < p.c.End {
				ro.results[p.c.Start+i] = r.HostResult
			}
		}
	}
	if start >= 0 && ro.in.Rollout.MinHealthy > 0 && ro.in.Op != proc.OpStatus {
		ro.healthGate(ctx, start, end)
	}
	ro.record(ctx, func(c rolloutChunk) bool { return c.Batch == ro.batch })
}

// healthGate holds the batch's hosts whose op succeeded to min_healthy,
// one HealthGate activity per chunk. A gate that cannot run at all gives
// no evidence of health: its hosts fail.
func (ro *rollout) healthGate(ctx workflow.Context, start, end int) {
	minHealthy := ro.in.Rollout.MinHealthy
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: minHealthy + 2*policies.StatusBatchDeadline,
		HeartbeatTimeout:    policies.HeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	type gate struct {
		index []int
		fut   workflow.Future
	}
	var gates []gate
	for s := start; s < end; s += policies.ChunkSize {
		var g gate
		var items []proc.Item
		for i := s; i < min(s+policies.ChunkSize, end); i++ {
			if ro.results[i].Code == proc.CodeSuccess {
				items = append(items, ro.in.Items[i])
				g.index = append(g.index, i)
			}
		}
		if len(items) == 0 {
			continue
		}
		g.fut = workflow.ExecuteActivity(actx, HealthGateActivity, HealthGateInput{TaskID: ro.in.TaskID, Items: items,
			MinHealthy: minHealthy, Every: policies.HealthCheckEvery(minHealthy)})
		gates = append(gates, g)
	}
	for _, g := range gates {
		var failures []HealthFailure
		if err := g.fut.Get(ctx, &failures); err != nil {
			for _, i := range g.index {
				ro.results[i] = proc.Fail(proc.CodeUnhealthy, "health gate could not run: %s", oneLine(err.Error()))
			}
			continue
		}
		for _, f := range failures {
			if f.Index >= 0 && f.Index < len(g.index) {
				ro.results[g.index[f.Index]] = proc.Fail(proc.CodeUnhealthy, "%s within min_healthy %s after the op", f.Why, minHealthy)
			}
		}
	}
}

func (ro *rollout) failed() int { return proc.CountFailed(ro.results) }

func (ro *rollout) status() RolloutStatus {
	st := RolloutStatus{TaskID: ro.in.TaskID, State: ro.state(), Batch: ro.batch, Batches: len(ro.sizes), Total: len(ro.results)}
	for _, r := range ro.results {
		switch r.Code {
		case proc.CodeRunning:
			continue
		case proc.CodeNotRun:
			st.NotRun++
		case proc.CodeSuccess:
		default:
			st.Failed++
		}
		st.Done++
	}
	return st
}

// snapshot is the rollout's result and progress answer: its chunks, so it
// stays small whatever the fleet. get_proc_operate_result reads each.
func (ro *rollout) snapshot() OperateResult {
	out := OperateResult{TaskID: ro.in.TaskID, Total: len(ro.results), Chunks: make([]string, len(ro.chunks))}
	for i, c := range ro.chunks {
		out.Chunks[i] = c.ID
	}
	for _, r := range ro.results {
		if r.Code != proc.CodeRunning {
			out.Done++
		}
	}
	return out
}
