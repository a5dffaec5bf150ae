package policies

import (
	"time"

	"github.com/drover-sh/drover/proc"
)

// A task's host requests wait in their hosts' queues: a host workflow runs
// its ops one at a time. Each request carries the latest time it may still
// start; one its host dequeues later is not run and answers 9105, so a task
// that has given up on a host never has that host act on its behalf later.

// DeliveryAllowance is the time a request may take to reach its host's
// workflow and be dequeued when the host is idle: a loaded engine has been
// seen to take over a minute for a 100-host task on a busy machine, and an
// op refused for the engine's slowness would be refused for nothing.
const DeliveryAllowance = 2 * time.Minute

// Deadlines gives each of a task's items, issued at issued, the latest time
// its host may start it: DeliveryAllowance, plus the items of the same task
// ahead of it on the same host, each for its whole bound (HostOpDeadline),
// plus one bound of its own for whatever the host was already doing
// (another task's op, a supervision restart). Had every one of them used
// its whole bound, the item would still start in time. An item's spec is
// its inline spec; without one (the host's registered spec is used) the
// defaults bound it here.
func Deadlines(issued time.Time, op proc.OpType, items []proc.Item) []time.Time {
	return TaskDeadlines(issued, op, items, len(items))
}

// DeliveryPerHundred is the time added to DeliveryAllowance for each
// hundred items of a task: every item of a large task is handed out at
// once, and the engine dequeues them at its own pace. On a shared 2-core
// machine under load, 1,000 identities were dequeued at about 3 a second,
// and half of a start was refused at 5 s a hundred. The addition stays
// under MaxDeliveryExtra, so a deadline never outlives the task's backstop.
const DeliveryPerHundred = 30 * time.Second

// MaxDeliveryExtra caps what DeliveryPerHundred adds (10,000 items and up).
const MaxDeliveryExtra = 50 * time.Minute

// TaskDeadlines is Deadlines for items that are part of a task of
// taskSize items (a chunk of a split task), whose every item is delivered
// at the same time as these.
func TaskDeadlines(issued time.Time, op proc.OpType, items []proc.Item, taskSize int) []time.Time {
	issued = issued.Add(DeliveryExtra(max(taskSize, len(items))))
	out := make([]time.Time, len(items))
	waited := map[proc.HostID]time.Duration{}
	for i, it := range items {
		own := ItemOpDeadline(op, it)
		h := it.Target.HostID()
		out[i] = issued.Add(DeliveryAllowance + waited[h] + own)
		waited[h] += own
	}
	return out
}

// Passed reports whether a request with deadline was dequeued too late to
// run; the zero deadline (a request from before deadlines) never passes.
func Passed(deadline, now time.Time) bool {
	return !deadline.IsZero() && now.After(deadline)
}

// ItemOpDeadline bounds an item's op on its host: by its inline spec, or
// without one (the host's registered spec is used) by the defaults.
func ItemOpDeadline(op proc.OpType, it proc.Item) time.Duration {
	var spec proc.Spec
	if it.Spec != nil {
		spec = *it.Spec
	}
	return HostOpDeadline(op, WithDefaults(spec))
}

// DeliveryExtra is what DeliveryPerHundred adds for a task of n items.
func DeliveryExtra(n int) time.Duration {
	return min(time.Duration(n/100)*DeliveryPerHundred, MaxDeliveryExtra)
}

// DeliverLimit is how long a batch of items issued at issued, with their
// deadlines, is tried: until every item could have started by its
// deadline and ended within its bound, and DeliverGrace more.
func DeliverLimit(issued time.Time, op proc.OpType, items []proc.Item, deadlines []time.Time) time.Duration {
	latest := issued
	for i, it := range items {
		if end := deadlines[i].Add(ItemOpDeadline(op, it)); end.After(latest) {
			latest = end
		}
	}
	return latest.Sub(issued) + DeliverGrace
}
