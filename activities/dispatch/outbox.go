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

// An outbox carries to one task (a chunk, or a status task) the answers of
// every batch of it that this worker runs: one signal for all of them at
// most every policies.DeliverReportEvery, and at a batch's end one with
// what is left of its own. With each batch signalling on its own, a task
// of a hundred batches on a loaded server was kept so busy that the engine
// refused its batches' heartbeats and completions (BusyWorkflow) or let
// them time out, and gave up batches that had done their work.
type outbox struct {
	c     client.Client
	task  workflow.Execution
	every time.Duration

	mu      sync.Mutex
	pending []letter
	users   int
	stop    func()
	// settled is closed, and replaced, whenever a signal ends, taken or
	// not: a batch whose answers were in it looks again.
	settled chan struct{}
	// sends bounds the signals under way, so a task of many batches is
	// not sent their answers one signal at a time.
	sends chan struct{}
}

// letter is one answer and the batch it is from.
type letter struct {
	reply workflows.HostReply
	from  *sender
}

// sender is one batch's share of its task's outbox.
type sender struct {
	o *outbox
	d *Dispatcher
	// unsent counts its answers not yet taken by the task (o.mu).
	unsent int
}

const (
	// outboxMaxLetters bounds the answers of one signal, far below the
	// server's 2 MB payload limit.
	outboxMaxLetters = 500
	// outboxSends is how many signals one outbox has under way at once.
	outboxSends = 4
)

func newOutbox(c client.Client, task workflow.Execution, every time.Duration) *outbox {
	return &outbox{c: c, task: task, every: every, settled: make(chan struct{}), sends: make(chan struct{}, outboxSends)}
}

// joinOutbox gives a batch of task its share of the task's outbox on this
// worker, opening the outbox for the first.
func (d *Dispatcher) joinOutbox(task workflow.Execution) *sender {
	d.outboxMu.Lock()
	defer d.outboxMu.Unlock()
	if d.outboxes == nil {
		d.outboxes = map[workflow.Execution]*outbox{}
	}
	o := d.outboxes[task]
	if o == nil {
		o = newOutbox(d.Client, task, policies.DeliverReportEvery)
		o.stop = activities.Every(context.Background(), o.every, o.tick)
		d.outboxes[task] = o
	}
	o.users++
	return &sender{o: o, d: d}
}

// leave closes the outbox once its last batch left.
func (d *Dispatcher) leaveOutbox(o *outbox) {
	d.outboxMu.Lock()
	defer d.outboxMu.Unlock()
	if o.users--; o.users == 0 {
		o.stop()
		delete(d.outboxes, o.task)
	}
}

// add puts one of the batch's answers in the outbox.
func (s *sender) add(r workflows.HostReply) {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	s.o.pending = append(s.o.pending, letter{reply: r, from: s})
	s.unsent++
}

// close sends what is left of the batch's answers, trying again while a
// loaded server does not take them, until ctx's deadline (a batch given up
// still sends what it has: those hosts' answers are their own, and its
// retry need not wait on them) or the task is gone. With every answer
// taken, the task is done with the batch whether or not its completion
// reaches the server.
func (s *sender) close(ctx context.Context) {
	defer s.d.leaveOutbox(s.o)
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d)
		defer cancel()
	}
	o := s.o
	for wait, tries := time.Second, 1; ; {
		o.mu.Lock()
		left, settled := s.unsent, o.settled
		o.mu.Unlock()
		if left == 0 {
			return
		}
		sent, err := o.send(ctx)
		if err == nil {
			if !sent {
				// Its answers are in signals under way.
				select {
				case <-settled:
				case <-ctx.Done():
					logWarn(ctx, "a batch's answers never reached its task", "task", o.task.ID, "answers", left)
					return
				}
			}
			continue
		}
		logTry(ctx, tries, "the engine did not take a batch's answers; sending them again", "task", o.task.ID, "answers", left, "error", err)
		if sleepCtx(ctx, wait) != nil {
			logWarn(ctx, "a batch's answers never reached its task", "task", o.task.ID, "answers", left, "error", err)
			return
		}
		wait, tries = min(2*wait, 5*time.Second), tries+1
	}
}

// tick sends what came in since the last signals.
func (o *outbox) tick() {
	ctx, cancel := context.WithTimeout(context.Background(), o.every)
	defer cancel()
	for {
		if sent, err := o.send(ctx); !sent || err != nil {
			return
		}
	}
}

// send signals the task up to outboxMaxLetters of the answers waiting, and
// reports whether there were any. Answers it could not deliver wait for
// the next signal, ahead of newer ones; a task that is gone takes none.
func (o *outbox) send(ctx context.Context) (bool, error) {
	select {
	case o.sends <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-o.sends }()
	o.mu.Lock()
	n := min(len(o.pending), outboxMaxLetters)
	batch := append([]letter(nil), o.pending[:n]...)
	o.pending = o.pending[n:]
	o.mu.Unlock()
	if n == 0 {
		return false, nil
	}
	replies := make([]workflows.HostReply, n)
	for i, l := range batch {
		replies[i] = l.reply
	}
	err := o.c.SignalWorkflow(ctx, o.task.ID, o.task.RunID, workflows.AnswersSignal, replies)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		err = nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.pending = append(batch, o.pending...)
	} else {
		for _, l := range batch {
			l.from.unsent--
		}
	}
	close(o.settled)
	o.settled = make(chan struct{})
	return true, err
}
