package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/policies"
)

// batchOptions are a batch activity's options, with limit its time to
// close. Its retries go on until limit: a batch the engine gave up is run
// again, and its hosts answer for themselves. It is never started eagerly
// in the reply to its workflow's task: a loaded server can send that reply
// after the worker stopped waiting for it, and the activity, started on
// the server but on no worker, then waits out its heartbeat timeout with
// every host in it. From the task queue, a task no poll took is handed to
// the next one.
func batchOptions(ctx workflow.Context, limit time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    limit,
		ScheduleToCloseTimeout: limit,
		HeartbeatTimeout:       policies.BatchHeartbeatTimeout,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second},
		DisableEagerExecution:  true,
	})
}

// batches tracks the items of a task's batch activities and how many of
// each batch's items still await an answer. A batch is done when its
// activity ends or when every one of its items has an answer (its
// AnswersSignal), whichever comes first: an activity whose completion a
// loaded server lost then costs the task nothing, where it would wait for
// the activity's heartbeat timeout and a retry.
type batches struct {
	of   []int // each item's batch, -1 for none
	left []int
	done []bool
}

func newBatches(items int) *batches {
	of := make([]int, items)
	for i := range of {
		of[i] = -1
	}
	return &batches{of: of}
}

// add opens a batch of the given items and returns its number.
func (b *batches) add(items []int) int {
	n := len(b.left)
	for _, i := range items {
		b.of[i] = n
	}
	b.left = append(b.left, len(items))
	b.done = append(b.done, false)
	return n
}

// answered notes item i's first answer, and reports whether it closed the
// item's batch.
func (b *batches) answered(i int) bool {
	if i < 0 || i >= len(b.of) || b.of[i] < 0 {
		return false
	}
	n := b.of[i]
	if b.done[n] {
		return false
	}
	b.left[n]--
	if b.left[n] > 0 {
		return false
	}
	b.done[n] = true
	return true
}

// ended closes batch n as its activity ended, and reports whether it was
// still open.
func (b *batches) ended(n int) bool {
	if b.done[n] {
		return false
	}
	b.done[n] = true
	return true
}

// closesOnAnswers reports whether this task's batches are done once their
// items are answered, not only when their activities end.
func closesOnAnswers(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, VersionAnswersCloseBatches, workflow.DefaultVersion, 1) >= 1
}

// takeAnswers sets each reply's answer, noting it in b (when not nil); it
// reports how many batches the answers closed.
func (op *operation) takeAnswers(replies []HostReply, b *batches) int {
	closed := 0
	for _, r := range replies {
		i := r.Index - op.in.Offset
		if op.set(i, r.Result) && b != nil && b.answered(i) {
			closed++
		}
	}
	return closed
}
