package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// runDelivered hands the items to their hosts, batch by batch, and takes
// each batch's answers as it ends. A batch the engine gave up on is tried
// again until its items' deadlines have passed: its hosts answer for
// themselves or, never reached in time, are answered 9105.
func (op *operation) runDelivered(ctx workflow.Context) {
	issued := workflow.Now(ctx)
	deadlines := policies.TaskDeadlines(issued, op.in.Op, op.in.Items, op.in.Total)
	cancels := workflow.GetSignalChannel(ctx, CancelSignal)
	sel := workflow.NewSelector(ctx)
	var b *batches
	if closesOnAnswers(ctx) {
		b = newBatches(len(op.in.Items))
	}
	// pending counts the batches not yet done: with b, a batch is done
	// once its items are answered, by its AnswersSignal, or its activity
	// ends.
	pending := 0
	for _, idx := range policies.HostBatches(op.in.Items, policies.DeliverBatch) {
		in := DeliverInput{TaskID: op.in.TaskID, Op: op.in.Op, Manage: op.in.Manage, Files: op.in.Files}
		for _, i := range idx {
			in.Items = append(in.Items, op.in.Items[i])
			in.Indexes = append(in.Indexes, op.in.Offset+i)
			in.Deadlines = append(in.Deadlines, deadlines[i])
		}
		limit := policies.DeliverLimit(issued, op.in.Op, in.Items, in.Deadlines)
		actx := batchOptions(ctx, limit)
		batch := idx
		pending++
		n := -1
		if b != nil {
			n = b.add(idx)
		}
		sel.AddFuture(workflow.ExecuteActivity(actx, DeliverActivity, in), func(f workflow.Future) {
			if b == nil || b.ended(n) {
				pending--
			}
			var replies []HostReply
			if err := f.Get(ctx, &replies); err != nil {
				for _, i := range batch {
					op.set(i, proc.Fail(proc.CodeTimeout, "no answer from the host by the task's deadline: %s", oneLine(err.Error())))
				}
				return
			}
			for _, r := range replies {
				op.set(r.Index-op.in.Offset, r.Result)
			}
		})
	}
	sel.AddReceive(cancels, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		op.cancel(ctx)
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, AnswersSignal), func(c workflow.ReceiveChannel, _ bool) {
		var replies []HostReply
		c.Receive(ctx, &replies)
		pending -= op.takeAnswers(replies, b)
	})
	for pending > 0 {
		sel.Select(ctx)
	}
}
