package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// operation is an Operate workflow's state: one slot per item, filled as
// host replies arrive.
type operation struct {
	in      OperateInput
	results []proc.HostResult
	done    int
	chunks  []string
	// chunkCounts are the chunks' counts, filled as each finishes.
	chunkCounts []ChunkCounts
	// cancelled: the task was cancelled (see operate_cancel.go).
	cancelled bool
}

// Operate runs one op over every item and never fails because a host did:
// each host ends with a code.
func Operate(ctx workflow.Context, in OperateInput) (OperateResult, error) {
	op := &operation{in: in, results: make([]proc.HostResult, len(in.Items))}
	for i := range op.results {
		op.results[i] = proc.Pending()
	}
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (OperateResult, error) {
		return op.snapshot(), nil
	}); err != nil {
		return OperateResult{}, err
	}
	// A chunk the server has not started yet has no progress of its own;
	// its items are still named here, so every key is answered (115)
	// from the first poll on.
	if err := workflow.SetQueryHandler(ctx, ChunkPendingQuery, func(chunk int) ([]KeyedResult, error) {
		if in.Split > 0 {
			// The client started every chunk before the task: one not
			// found is gone, and the task never held its items.
			return nil, fmt.Errorf("chunk %d of split task %s has no workflow", chunk, in.TaskID)
		}
		return op.pendingChunk(chunk), nil
	}); err != nil {
		return OperateResult{}, err
	}
	// Progress in numbers, so a caller drawing progress need not fetch
	// every host's result on every tick.
	if err := workflow.SetQueryHandler(ctx, CountsQuery, func() (Counts, error) {
		return op.counts(), nil
	}); err != nil {
		return OperateResult{}, err
	}
	// Tasks of more than ChunkSize items split into chunks, status too: a
	// status result holds every host's content, and one for thousands of
	// hosts would pass the server's payload limit. A split task records
	// its outcome from its chunks' results. Both are guarded, so a task
	// begun by an older worker replays as it ran.
	chunked := len(in.Items) > policies.ChunkSize &&
		(in.Op != proc.OpStatus || workflow.GetVersion(ctx, VersionChunkedStatus, workflow.DefaultVersion, 1) >= 1)
	switch {
	case in.Split > 0:
		// Only a client that splits tasks itself sends Split, so no
		// history written before it takes this path.
		op.runSplit(ctx)
	case chunked:
		op.runChunks(ctx)
	case in.Op == proc.OpStatus, in.Op == proc.OpCheck:
		op.runStatus(ctx)
	default:
		op.runItems(ctx)
	}
	record := len(op.chunks) == 0
	if !record && in.Indexed && in.Offset == 0 {
		record = workflow.GetVersion(ctx, VersionChunkedOutcome, workflow.DefaultVersion, 1) >= 1
	}
	if in.Indexed && in.Offset == 0 && record {
		outcome, failed := outcomeOf(op.results)
		if in.Split > 0 {
			outcome, failed = outcomeOfCount(int64(op.counts().Failed))
		}
		_ = workflow.UpsertTypedSearchAttributes(ctx, SAOutcome.ValueSet(outcome), SAFailedHost.ValueSet(failed))
	}
	op.tellTask(ctx)
	return op.snapshot(), nil
}

// tellTask signals a split task's chunk's counts to the task, which then
// need not wait for its wait activity's end: a loaded server can lose that
// activity's completion until its heartbeat times out. The signal is sent
// before the chunk ends, as the server sends none for a closed workflow. A
// task not started yet, or ended, learns the counts by its wait.
func (op *operation) tellTask(ctx workflow.Context) {
	if op.in.Split > 0 || op.in.Total == 0 || workflow.GetInfo(ctx).ParentWorkflowExecution != nil {
		return
	}
	if workflow.GetVersion(ctx, VersionChunksTellTask, workflow.DefaultVersion, 1) < 1 {
		return
	}
	c := op.counts()
	counts := ChunkCounts{ID: workflow.GetInfo(ctx).WorkflowExecution.ID, Total: c.Total, Done: c.Done, Failed: c.Failed, Finished: true}
	if err := workflow.SignalExternalWorkflow(ctx, op.in.TaskID, "", ChunkEndedSignal, counts).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Info("the task was not told of its chunk's end; it learns it by its wait", "task", op.in.TaskID, "error", err)
	}
}

// runItems hands each item to its host's workflow and waits for the
// answers: by update, in Deliver batches, or, in a task begun before
// those, by signal (old_operate.go).
func (op *operation) runItems(ctx workflow.Context) {
	if workflow.GetVersion(ctx, VersionDeliverUpdates, workflow.DefaultVersion, 1) >= 1 {
		op.runDelivered(ctx)
		return
	}
	op.runSignalled(ctx)
}

// runStatus probes in batches of StatusBatch hosts per activity, at most
// MaxInFlight activities at a time; the host check runs the same way.
// Status only reads, so it needs neither host workflows nor chunk
// children: its history is a few events per batch.
func (op *operation) runStatus(ctx workflow.Context) {
	// A batch the engine gave up (its heartbeats lost on a loaded server)
	// is tried again until the task's deadline: its hosts answer for
	// themselves, or, never probed by then, 9105.
	issued := workflow.Now(ctx)
	limit := policies.StatusTaskDeadline(max(op.in.Total, len(op.in.Items)))
	// Every batch starts at once and its probes queue on the worker's
	// connections behind the others', so an attempt may take as long as
	// the task: a hung host is bounded by its own probe's deadline, a lost
	// worker by the heartbeat timeout.
	actx := batchOptions(ctx, limit)
	sel := workflow.NewSelector(ctx)
	var b *batches
	if closesOnAnswers(ctx) {
		b = newBatches(len(op.in.Items))
	}
	// open counts the batches not yet done: with b, a batch is done once
	// its items are answered, by its AnswersSignal, or its activity ends.
	open := 0
	if b != nil {
		sel.AddReceive(workflow.GetSignalChannel(ctx, AnswersSignal), func(c workflow.ReceiveChannel, _ bool) {
			var replies []HostReply
			c.Receive(ctx, &replies)
			open -= op.takeAnswers(replies, b)
		})
	}
	for start := 0; start < len(op.in.Items); start += policies.StatusBatch {
		for open >= policies.MaxInFlight {
			sel.Select(ctx)
		}
		end := min(start+policies.StatusBatch, len(op.in.Items))
		fut := workflow.ExecuteActivity(actx, op.batchActivity(), StatusInput{TaskID: op.in.TaskID, Items: op.in.Items[start:end], Offset: op.in.Offset + start})
		open++
		first, last := start, end
		batch := -1
		if b != nil {
			batch = b.add(span(first, last))
		}
		sel.AddFuture(fut, func(f workflow.Future) {
			if b == nil || b.ended(batch) {
				open--
			}
			var replies []HostReply
			if err := f.Get(ctx, &replies); err != nil {
				for i := first; i < last; i++ {
					op.set(i, proc.Fail(proc.CodeTimeout, "not run: deadline passed (the engine did not run this host's %s batch by %s: %s)", op.in.Op,
						issued.Add(limit).UTC().Format(time.RFC3339), oneLine(err.Error())))
				}
				return
			}
			op.takeAnswers(replies, nil)
		})
	}
	for open > 0 {
		sel.Select(ctx)
	}
}

// span is the indexes from first up to last.
func span(first, last int) []int {
	out := make([]int, 0, last-first)
	for i := first; i < last; i++ {
		out = append(out, i)
	}
	return out
}

// batchActivity is the activity each batch of a read task runs: the host
// check's, or status's probes.
func (op *operation) batchActivity() string {
	if op.in.Op == proc.OpCheck {
		return CheckActivity
	}
	return StatusActivity
}

// set records item i's answer; false for a duplicate or stray reply.
func (op *operation) set(i int, r proc.HostResult) bool {
	if i < 0 || i >= len(op.results) || op.results[i].Code != proc.CodeRunning {
		return false
	}
	op.results[i] = r
	op.done++
	return true
}

// pendingChunk is chunk n's items, each pending.
func (op *operation) pendingChunk(n int) []KeyedResult {
	start := n * policies.ChunkSize
	if n < 0 || start >= len(op.in.Items) {
		return nil
	}
	items := op.in.Items[start:min(start+policies.ChunkSize, len(op.in.Items))]
	out := make([]KeyedResult, len(items))
	for i, it := range items {
		out[i] = KeyedResult{Key: it.Key(), AgentID: it.Target.AgentID, HostResult: proc.Pending()}
	}
	return out
}

func (op *operation) snapshot() OperateResult {
	out := OperateResult{TaskID: op.in.TaskID, Done: op.done, Total: op.total()}
	if len(op.chunks) > 0 {
		out.Chunks = op.chunks
		out.Failed = op.counts().Failed
		return out
	}
	out.Results = make([]KeyedResult, len(op.in.Items))
	for i, it := range op.in.Items {
		out.Results[i] = KeyedResult{Key: it.Key(), AgentID: it.Target.AgentID, HostResult: op.results[i]}
	}
	out.Failed = proc.CountFailed(op.results)
	return out
}

// total is the task's item count, whether it holds its items or not.
func (op *operation) total() int {
	if op.in.Split > 0 {
		return op.in.Total
	}
	return len(op.in.Items)
}

// counts is the task's progress in numbers: a task in chunks sums its
// finished chunks and lists them all.
func (op *operation) counts() Counts {
	c := Counts{Total: op.total()}
	if len(op.chunkCounts) == 0 {
		for _, r := range op.results {
			if r.Done() {
				c.Done++
			}
		}
		c.Failed = proc.CountFailed(op.results)
		return c
	}
	c.Chunks = append([]ChunkCounts(nil), op.chunkCounts...)
	for _, ch := range op.chunkCounts {
		c.Done += ch.Done
		c.Failed += ch.Failed
	}
	return c
}

// activityFailure turns an activity that could not report a result (worker
// lost past its retries, timeout) into that host's code.
func activityFailure(err error) proc.HostResult {
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return proc.Fail(proc.CodeTimeout, "host did not answer within the op deadline (%s)", te.TimeoutType())
	}
	return proc.HostResult{Code: proc.CodeInternal, Message: oneLine(err.Error())}
}

// oneLine keeps an error's text on one line: per-host messages are rows of
// a table or lines of a log.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
