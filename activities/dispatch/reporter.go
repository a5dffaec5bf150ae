package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/workflows"
)

// reporter sends a Deliver batch's answers to its task as they come.
type reporter struct {
	c    client.Client
	task workflow.Execution
	mu   sync.Mutex
	new  []workflows.HostReply
	// sending is held while answers are out of new: by a periodic signal
	// until it went or they were put back, so the last signal never
	// misses answers a failed periodic one puts back after it.
	sending sync.Mutex
	every   time.Duration
}

func newReporter(c client.Client, task workflow.Execution) *reporter {
	return &reporter{c: c, task: task, every: policies.DeliverReportEvery}
}

func (r *reporter) add(a workflows.HostReply) {
	r.mu.Lock()
	r.new = append(r.new, a)
	r.mu.Unlock()
}

// run sends what came in, every policies.DeliverReportEvery, until the
// returned stop, which sends what is left (tried again until it is
// taken, signalAnswers): with every answer signalled, the task is
// done with the batch whether or not its completion reaches the server.
// The answers of a periodic signal that fails go with the next: a task
// takes an answer once, and a batch is done only once all of its answers
// reached the task.
func (r *reporter) run(ctx context.Context) (stop func()) {
	stopEvery := activities.Every(ctx, r.every, func() {
		r.sending.Lock()
		defer r.sending.Unlock()
		if batch := r.take(); len(batch) > 0 {
			if err := r.c.SignalWorkflow(ctx, r.task.ID, r.task.RunID, workflows.AnswersSignal, batch); err != nil {
				r.putBack(batch)
			}
		}
	})
	return func() {
		stopEvery()
		r.sending.Lock()
		defer r.sending.Unlock()
		if batch := r.take(); len(batch) > 0 {
			signalAnswers(ctx, r.c, r.task, batch)
		}
	}
}

// putBack returns answers a signal did not deliver, ahead of newer ones.
func (r *reporter) putBack(batch []workflows.HostReply) {
	r.mu.Lock()
	r.new = append(batch, r.new...)
	r.mu.Unlock()
}

func (r *reporter) take() []workflows.HostReply {
	r.mu.Lock()
	defer r.mu.Unlock()
	batch := r.new
	r.new = nil
	return batch
}

// signalAnswers sends a batch's answers to its task, trying again while a
// loaded server does not take them, until the attempt's deadline (ctx's)
// or the task is gone. A batch given up still sends what it has: those
// hosts' answers are their own, and its retry need not wait on them. A
// budget of a minute was not enough: at 10,000 identities the server took
// no signal to a chunk for longer, the batch's completion was lost too,
// and its task waited out the batch's heartbeat timeout and a retry with
// the machine idle.
func signalAnswers(ctx context.Context, c client.Client, task workflow.Execution, replies []workflows.HostReply) {
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d)
		defer cancel()
	}
	for wait, tries := time.Second, 1; ; wait, tries = min(2*wait, 5*time.Second), tries+1 {
		err := c.SignalWorkflow(ctx, task.ID, task.RunID, workflows.AnswersSignal, replies)
		var nf *serviceerror.NotFound
		if err == nil || errors.As(err, &nf) {
			return
		}
		logTry(ctx, tries, "the engine did not take a batch's answers; sending them again", "task", task.ID, "answers", len(replies), "error", err)
		if sleepCtx(ctx, wait) != nil {
			logWarn(ctx, "a batch's answers never reached its task", "task", task.ID, "answers", len(replies), "error", err)
			return
		}
	}
}
