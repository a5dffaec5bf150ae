package workflows

import (
	"go.temporal.io/sdk/workflow"
)

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
