package workflows

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// Shard watches: a host workflow arms its shard with the generation of
// what it wants watched; the shard's one activity polls every member host
// and signals a host only when it needs a decision. The host decides as it
// always did, then arms the next generation.
// ShardWorkflowID names the shard workflow that watches a host, one of
// shards, by the hash of the host workflow's id: a host stays in its shard
// as long as the shard count stays. Shards are per watch queue, so
// deployments sharing a namespace never share one.
func ShardWorkflowID(watchQueue, hostWorkflowID string, shards int) string {
	f := fnv.New32a()
	_, _ = f.Write([]byte(hostWorkflowID))
	return ShardID(watchQueue, int(f.Sum32()%uint32(max(shards, 1))))
}

// ShardID names shard n of a watch queue.
func ShardID(watchQueue string, n int) string { return fmt.Sprintf("watch-shard:%s:%d", watchQueue, n) }

// ShardArm asks a shard to watch a host at a generation; Gen 0 asks it to
// stop watching the host, as of generation Ends when that is set.
type ShardArm struct {
	Host string `json:"host"`
	Gen  int    `json:"gen"`
	// Ends lets a disarm that arrives after a newer arm leave that arm be:
	// a worker sends disarms without waiting for them.
	Ends int `json:"ends,omitempty"`
}

// sharded reports whether the host's watched processes are watched by its
// shard. Hosts that took the default version (their runs began before
// shards) keep a watch of their own, as does every host while
// watch_shards is 0.
func (h *host) sharded(ctx workflow.Context, watched []int) bool {
	return len(watched) > 0 && h.Supervision.WatchShards > 0 &&
		h.has(ctx, VersionWatchShard)
}

// watchInput is what the watch of the watched entries polls.
func (h *host) watchInput(watched []int) activities.WatchInput {
	interval := h.Supervision.Interval
	if interval <= 0 {
		interval = policies.DefaultPollInterval
	}
	in := activities.WatchInput{Target: h.target(), Interval: interval, LimitPolls: h.Supervision.LimitPolls,
		TimeZone: h.Supervision.TimeZone, Zone: h.Zone}
	for _, i := range watched {
		e := h.Entries[i]
		in.Entries = append(in.Entries, activities.WatchEntry{Process: e.Process, Spec: policies.WithDefaults(e.Spec), Drifted: e.Drifted})
	}
	return in
}

// waitShard is wait for a host its shard watches. The shard is armed
// again only when what is to be watched changed, or its last generation
// was decided on: a quiet host sends its shard nothing.
func (h *host) waitShard(ctx, wctx workflow.Context, sel workflow.Selector, watched []int) {
	now := workflow.Now(ctx)
	in := h.watchInput(watched)
	// Named from the host's state, never the execution's id: a history
	// replayed under another id must make the same decisions.
	shard := ShardWorkflowID(h.watchQueue(ctx), HostWorkflowID(h.Host), h.Supervision.WatchShards)
	// One arm at a time, and none waited for: a burst of ops runs at
	// full speed, and the shard learns only the latest of what changed.
	if h.arming == nil && (h.armed == nil || h.WatchShard != shard || !sameWatchInput(*h.armed, in)) && !now.Before(h.watchBackoff) {
		h.arm(ctx, shard, in)
	}
	if h.arming != nil {
		sel.AddFuture(h.arming, func(f workflow.Future) { h.armed1(ctx, f) })
	}
	var got *activities.ShardEvents
	for _, ch := range []workflow.ReceiveChannel{h.watchEvents, h.watchUpdates} {
		sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) {
			var ev activities.ShardEvents
			c.Receive(ctx, &ev)
			if h.current(ev, in) {
				got = &ev
			}
		})
	}
	wake, ok := h.nextWake(now)
	if now.Before(h.watchBackoff) && (!ok || h.watchBackoff.Before(wake)) {
		wake, ok = h.watchBackoff, true
	}
	if ok {
		sel.AddFuture(workflow.NewTimer(wctx, wake.Sub(now)), func(workflow.Future) {})
	}
	sel.Select(ctx)
	if got == nil {
		return
	}
	armed := *h.armed
	h.armed = nil
	if got.Failed != "" {
		h.watchBackoff = workflow.Now(ctx).Add(policies.WatchFailureBackoff)
		h.event(ctx, proc.ProcessID{}, EventWatchFailed, oneLine(fmt.Sprintf("supervision paused for %s: %s", policies.WatchFailureBackoff, got.Failed)), 0)
		return
	}
	if got.Zone != nil {
		h.setZone(ctx, *got.Zone)
	}
	// Events name the armed entries by position; the registry may have
	// been reordered since.
	at := make([]int, len(armed.Entries))
	for i, e := range armed.Entries {
		at[i] = h.find(e.Process)
	}
	h.decide(ctx, at, got.Events)
}

// current reports whether events are of what the host watches now, in:
// another generation's were seen before the host last decided or armed,
// and events of what changed since it armed (an op ran, a config was
// pushed) while the next arm waits for the one under way judge the host
// by a registry it no longer has.
func (h *host) current(ev activities.ShardEvents, in activities.WatchInput) bool {
	return ev.Gen == h.WatchGen && h.armed != nil && sameWatchInput(*h.armed, in)
}

// ErrStaleWatchEvents is the type of the error a host refuses events with
// that it no longer watches for.
const ErrStaleWatchEvents = "StaleWatchEvents"

// validWatchEvents refuses events the host would not act on, before they
// cost it a workflow task.
func (h *host) validWatchEvents(_ workflow.Context, ev activities.ShardEvents) error {
	if !h.current(ev, h.watchInput(h.watched())) {
		return temporal.NewApplicationError(fmt.Sprintf("watch events of generation %d: the host watches generation %d", ev.Gen, h.WatchGen), ErrStaleWatchEvents)
	}
	return nil
}

// onWatchEvents takes events the validator let through to the host's loop.
func (h *host) onWatchEvents(_ workflow.Context, ev activities.ShardEvents) error {
	h.watchUpdates.SendAsync(ev)
	return nil
}

// arm asks the shard to watch the next generation; the armed input is
// set first, so the shard's query of it answers this generation.
func (h *host) arm(ctx workflow.Context, shard string, in activities.WatchInput) {
	if h.WatchShard != "" && h.WatchShard != shard {
		h.disarm(ctx)
	}
	h.WatchGen++
	// What was armed is kept apart from the registry: an op that edits an
	// entry in place must not edit what the shard is watching too, or the
	// host would never see that the two differ.
	in = cloneWatchInput(in)
	h.armed, h.WatchShard = &in, shard
	h.arming = h.armShard(ctx, ArmInput{Shard: shard, Arm: ShardArm{Host: HostWorkflowID(h.Host), Gen: h.WatchGen}, Watch: h.armed})
}

// armed1 takes the end of an arm: one that failed pauses supervision,
// and says so, before the host arms again.
func (h *host) armed1(ctx workflow.Context, f workflow.Future) {
	h.arming = nil
	if err := f.Get(ctx, nil); err != nil {
		h.armed = nil
		h.watchBackoff = workflow.Now(ctx).Add(policies.WatchFailureBackoff)
		h.event(ctx, proc.ProcessID{}, EventWatchFailed, oneLine(fmt.Sprintf("supervision paused for %s: its shard %s: %v", policies.WatchFailureBackoff, h.WatchShard, err)), 0)
	}
}

// disarm takes the host out of its shard: nothing is watched, or not by
// a shard. Never reached by a host that never armed one.
func (h *host) disarm(ctx workflow.Context) {
	if h.WatchShard == "" {
		return
	}
	// An arm still under way lands first, so the disarm is the last word.
	if h.arming != nil {
		_ = h.arming.Get(ctx, nil)
		h.arming = nil
	}
	// A shard that missed it asks the host, which answers nothing armed.
	_ = h.armShard(ctx, ArmInput{Shard: h.WatchShard, Arm: ShardArm{Host: HostWorkflowID(h.Host)}, Ends: h.WatchGen}).Get(ctx, nil)
	h.WatchShard, h.armed = "", nil
}

// watchQueue is the queue the host's watches run on.
func (h *host) watchQueue(ctx workflow.Context) string {
	if h.Supervision.WatchQueue != "" {
		return h.Supervision.WatchQueue
	}
	return workflow.GetInfo(ctx).TaskQueueName + WatchQueueSuffix
}

// armShard sends in, an arm of the host (or, at generation 0, a disarm),
// to its shard.
func (h *host) armShard(ctx workflow.Context, in ArmInput) workflow.Future {
	in.WatchQueue = h.watchQueue(ctx)
	retry := &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5}
	if h.has(ctx, VersionArmLocal) {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry})
		return workflow.ExecuteLocalActivity(lctx, ArmWatchActivity, in)
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry})
	return workflow.ExecuteActivity(actx, ArmWatchActivity, in)
}

// watchQuery answers the shard watch: the armed generation and its input.
func (h *host) watchQuery() (activities.HostWatch, error) {
	return activities.HostWatch{Gen: h.WatchGen, Input: h.armed}, nil
}

// sameWatchInput compares as the shard would read them: encoded, so an
// empty list and none are the same.
func sameWatchInput(a, b activities.WatchInput) bool {
	x, errx := json.Marshal(a)
	y, erry := json.Marshal(b)
	return errx == nil && erry == nil && string(x) == string(y)
}

// cloneWatchInput is a deep copy, through the same encoding activities
// get it in; one that cannot be encoded could not be armed either.
func cloneWatchInput(in activities.WatchInput) activities.WatchInput {
	b, err := json.Marshal(in)
	if err != nil {
		return in
	}
	var out activities.WatchInput
	if json.Unmarshal(b, &out) != nil {
		return in
	}
	return out
}
