package workflows

// Only Operate workflows begun before VersionDeliverUpdates (ledger 15)
// reach the code in this file: they handed their items to the hosts with
// one Dispatch activity, by OpSignal, and each host signalled its answer
// back (ReplySignal). A task ends within policies.TaskBackstop of its
// start, so this file, the Dispatch activity (activities/dispatch,
// old_dispatch.go) and the reply signal of host workflows (old_host.go) may
// go once every task begun before the deploy that brought Deliver has
// ended, and the corpus histories that schedule Dispatch are replaced
// (docs/upgrades.md, Retiring an old branch).

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// DispatchInput is one Operate workflow's items to hand out by signal.
// Only tasks begun before VersionDeliverUpdates send it.
type DispatchInput struct {
	ReplyTo string      `json:"reply_to"`
	TaskID  string      `json:"task_id"`
	Op      proc.OpType `json:"op_type"`
	Manage  bool        `json:"manage,omitempty"`
	Items   []proc.Item `json:"items"`
	Offset  int         `json:"offset"`
	// Issued is when the task handed its items out, by the workflow's
	// clock: each request's deadline counts from it.
	Issued time.Time `json:"issued,omitempty"`
	// Files is a file op's files and options; nil for every other op.
	Files *proc.FileOp `json:"files,omitempty"`
	// TaskSize is the whole task's item count, when these are one chunk
	// of it; 0 means these items are the whole task.
	TaskSize int `json:"task_size,omitempty"`
}

// DispatchOutput lists items answered without a host workflow (unknown
// hosts) and items that could not be delivered.
type DispatchOutput struct {
	Answered    []HostReply `json:"answered,omitempty"`
	Undelivered []int       `json:"undelivered,omitempty"`
}

// runSignalled hands every item to its host with one Dispatch activity and
// waits for the hosts' reply signals.
func (op *operation) runSignalled(ctx workflow.Context) {
	self := workflow.GetInfo(ctx).WorkflowExecution.ID
	dctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    policies.HeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	var sent DispatchOutput
	issued := workflow.Now(ctx)
	if err := workflow.ExecuteActivity(dctx, DispatchActivity, DispatchInput{
		ReplyTo: self, TaskID: op.in.TaskID, Op: op.in.Op, Manage: op.in.Manage,
		Items: op.in.Items, Offset: op.in.Offset, Files: op.in.Files, Issued: issued, TaskSize: op.in.Total,
	}).Get(ctx, &sent); err != nil {
		// Some items may have reached their hosts: they are answered by
		// them, or cancelled there before they are reported not run.
		var pending []int
		for i := range op.results {
			if op.results[i].Code == proc.CodeRunning {
				pending = append(pending, i)
			}
		}
		op.undelivered(ctx, pending, issued, oneLine(fmt.Sprintf("could not hand the op to the hosts: %v", err)))
		return
	}
	for _, r := range sent.Answered {
		op.set(r.Index-op.in.Offset, r.Result)
	}
	op.undelivered(ctx, sent.Undelivered, issued, "could not hand the op to its host workflow")
	// A backstop only: every host op has its own deadline on the host side.
	op.awaitReplies(ctx, policies.TaskBackstop, func() bool { return op.done < len(op.in.Items) }, func() {
		op.failPending(proc.CodeTimeout, fmt.Sprintf("no reply from the host within %s", policies.TaskBackstop))
	})
}

// awaitReplies takes host replies, and a cancel of the task, while waiting
// holds, for at most limit; onTimeout answers what is left then.
func (op *operation) awaitReplies(ctx workflow.Context, limit time.Duration, waiting func() bool, onTimeout func()) {
	replies := workflow.GetSignalChannel(ctx, ReplySignal)
	cancels := workflow.GetSignalChannel(ctx, CancelSignal)
	timedOut := false
	timer := workflow.NewTimer(ctx, limit)
	for waiting() && !timedOut {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(replies, func(c workflow.ReceiveChannel, _ bool) {
			var r HostReply
			c.Receive(ctx, &r)
			op.set(r.Index-op.in.Offset, r.Result)
		})
		sel.AddFuture(timer, func(workflow.Future) { timedOut = true })
		sel.AddReceive(cancels, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			op.cancel(ctx)
		})
		sel.Select(ctx)
	}
	if timedOut {
		onTimeout()
	}
}

func (op *operation) failPending(code proc.Code, msg string) {
	for i := range op.results {
		if op.results[i].Code == proc.CodeRunning {
			op.set(i, proc.HostResult{Code: code, Message: msg})
		}
	}
}

// undelivered answers items Dispatch could not be sure it handed over.
// Each may have reached its host, so it is cancelled there, by its own
// request id, before it is reported: a host then drops it whenever it
// arrives. The hosts answer those that did arrive; until the items'
// deadlines pass (a request not started by then never runs) the task
// waits for those answers, and the rest are answered 9199, not run.
func (op *operation) undelivered(ctx workflow.Context, items []int, issued time.Time, why string) {
	if len(items) == 0 {
		return
	}
	if workflow.GetVersion(ctx, VersionCancelTask, workflow.DefaultVersion, 1) < 1 {
		for _, i := range items {
			op.set(i, proc.HostResult{Code: proc.CodeInternal, Message: why})
		}
		return
	}
	deadlines := policies.TaskDeadlines(issued, op.in.Op, op.in.Items, op.in.Total)
	var latest time.Time
	var cancels []HostCancel
	for _, i := range items {
		it := op.in.Items[i]
		cancels = append(cancels, HostCancel{Host: it.Target.HostID(), ID: RequestID(op.in.TaskID, op.in.Offset+i)})
		if deadlines[i].After(latest) {
			latest = deadlines[i]
		}
	}
	if err := op.cancelOnHosts(ctx, cancels); err != nil {
		workflow.GetLogger(ctx).Warn("cancel of undelivered items could not reach every host", "task", op.in.TaskID, "error", err)
	}
	waiting := func() bool {
		for _, i := range items {
			if op.results[i].Code == proc.CodeRunning {
				return true
			}
		}
		return false
	}
	op.awaitReplies(ctx, max(latest.Sub(workflow.Now(ctx)), time.Second), waiting, func() {
		for _, i := range items {
			op.set(i, proc.HostResult{Code: proc.CodeInternal, Message: why + "; it was not run"})
		}
	})
}
