package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// wait blocks until a request arrives, the watch of the supervised
// processes calls for a decision, or a restart or periodic run falls due.
// While nothing happens, the watch runs as one long activity: a quiet host
// adds nothing to this workflow's history.
func (h *host) wait(ctx workflow.Context) {
	wctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	sel := workflow.NewSelector(ctx)
	for _, ch := range []workflow.ReceiveChannel{h.ops, h.updates} {
		sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) {
			var req HostRequest
			c.Receive(ctx, &req)
			h.Queue = append(h.Queue, req)
		})
	}
	sel.AddReceive(h.cancels, func(c workflow.ReceiveChannel, _ bool) {
		var task string
		c.Receive(ctx, &task)
		h.cancelTask(ctx, task)
	})
	watched := h.watched()
	if h.sharded(ctx, watched) {
		h.waitShard(ctx, wctx, sel, watched)
		return
	}
	h.disarm(ctx)
	now := workflow.Now(ctx)
	var watchOut *activities.WatchOutput
	if len(watched) > 0 && !now.Before(h.watchBackoff) {
		fut := h.startWatch(wctx, watched)
		sel.AddFuture(fut, func(f workflow.Future) {
			var out activities.WatchOutput
			if err := f.Get(ctx, &out); err != nil {
				h.watchBackoff = workflow.Now(ctx).Add(policies.WatchFailureBackoff)
				h.event(ctx, proc.ProcessID{}, EventWatchFailed, oneLine(fmt.Sprintf("supervision paused for %s: %v", policies.WatchFailureBackoff, err)), 0)
				return
			}
			watchOut = &out
		})
	}
	wake, ok := h.nextWake(now)
	if len(watched) > 0 && now.Before(h.watchBackoff) && (!ok || h.watchBackoff.Before(wake)) {
		wake, ok = h.watchBackoff, true
	}
	if ok {
		sel.AddFuture(workflow.NewTimer(wctx, wake.Sub(now)), func(workflow.Future) {})
	}
	sel.Select(ctx)
	if watchOut != nil {
		if watchOut.Zone != nil {
			h.setZone(ctx, *watchOut.Zone)
		}
		h.decide(ctx, watched, watchOut.Events)
	}
}

// setZone takes the zone crontab rules are read in, as the watch learned
// it, and reads every crontab rule again in it: a run computed in the old
// zone (or in UTC, before the host's zone was known) is due at another
// instant now.
func (h *host) setZone(ctx workflow.Context, z policies.Zone) {
	if !h.has(ctx, VersionCrontabZone) {
		return
	}
	h.Zone = z
	for i := range h.Entries {
		if e := &h.Entries[i]; e.Spec.CrontabRule != "" {
			e.NextRun = time.Time{}
		}
	}
}

// watched lists the entries supervision polls: every managed process that
// is not given up on and not already waiting for a restart.
func (h *host) watched() []int {
	if h.Supervision.Off {
		return nil // only workers that never supervise send Off
	}
	var out []int
	for i, e := range h.Entries {
		if e.Managed && !e.Cancelled && e.RetryAt.IsZero() {
			out = append(out, i)
		}
	}
	return out
}

// startWatch starts the host's own watch of its watched entries (a host
// its shard does not watch).
func (h *host) startWatch(ctx workflow.Context, watched []int) workflow.Future {
	in := h.watchInput(watched)
	if !h.has(ctx, VersionWatchQueue) {
		return h.startWatchOnOpsQueue(ctx, in)
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: policies.WatchRenew + 10*time.Minute,
		RetryPolicy:         watchRetryPolicy(),
		// Watches hold their slot for up to WatchRenew: on the ops' queue
		// they would make every op wait for a slot. A watch no worker
		// takes up in time fails, and the host records that supervision
		// is paused, rather than going unwatched silently.
		TaskQueue:              h.watchQueue(ctx),
		ScheduleToStartTimeout: policies.WatchScheduleToStart,
		// Each heartbeat is a request to the server: one per watch every
		// 0.8 heartbeat timeouts (the SDK's throttle) is most of what a
		// quiet fleet costs it.
		HeartbeatTimeout: policies.WatchHeartbeatTimeout,
	})
	return workflow.ExecuteActivity(actx, WatchActivity, in)
}

// watchRetryPolicy is how the server retries a host's own watch.
func watchRetryPolicy() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 10}
}

func (h *host) target() proc.Target { return proc.Target{CloudID: h.Host.CloudID, IP: h.Host.IP} }

// decide acts on what the watch saw. Every event is checked against the
// entry as it is now: management may have changed since the watch began.
func (h *host) decide(ctx workflow.Context, watched []int, events []activities.WatchEvent) {
	if upgradeProbe != nil && len(events) > 0 {
		upgradeProbe(ctx)
	}
	for _, ev := range events {
		if ev.Index < 0 || ev.Index >= len(watched) {
			continue
		}
		i := watched[ev.Index]
		if i < 0 || i >= len(h.Entries) || !h.Entries[i].Managed || h.Entries[i].Cancelled || !h.Entries[i].RetryAt.IsZero() {
			continue
		}
		e := &h.Entries[i]
		switch ev.Kind {
		case activities.WatchDead:
			e.Seen = &Sighting{At: workflow.Now(ctx)}
			h.restart(ctx, e, proc.OpStart, ev.Detail)
		case activities.WatchUnhealthy:
			if !h.has(ctx, VersionUnhealthyStopStart) {
				h.restart(ctx, e, proc.OpRestart, ev.Detail)
				continue
			}
			// Alive but unhealthy: a start would answer 828. It is
			// stopped, then started, each step recorded as it went.
			e.RetryStop = true
			h.restart(ctx, e, proc.OpStart, ev.Detail)
		case activities.WatchLimit:
			h.event(ctx, e.Process, EventLimitExceed, ev.Detail, e.Pid)
			stop := h.runOp(ctx, HostRequest{Op: proc.OpStop, Target: h.target(), Process: e.Process}, *e)
			e.saw(stop, workflow.Now(ctx))
			if stop.Result.Code != proc.CodeSuccess && stop.Result.Code != proc.CodeNotRunning {
				h.event(ctx, e.Process, EventRestartFailed, "stop over limit: "+stop.Result.Message, e.Pid)
				continue
			}
			if e.Spec.AutoType == proc.AutoResident {
				e.Restart = policies.RestartState{}
				h.attempt(ctx, e, proc.OpStart, "started again after exceeding its limit")
			}
		case activities.WatchDrift:
			e.Drifted = ev.Drifted
			kind := EventConfigDrift
			if len(ev.Drifted) == 0 {
				kind = EventConfigRestored
			}
			h.event(ctx, e.Process, kind, ev.Detail, e.Pid)
		}
	}
}

// restart applies the restart policy to a dead (or unhealthy) process.
func (h *host) restart(ctx workflow.Context, e *Entry, op proc.OpType, why string) {
	spec := policies.WithDefaults(e.Spec)
	d := policies.NewRestartPolicy(spec.StartRetries, spec.StartInterval).Next(e.Restart, workflow.Now(ctx), e.Process.Namespace+"/"+e.Process.Name)
	if d.CrashLoop && !h.has(ctx, VersionCrashBackoff) {
		d.Delay = 0
	}
	e.Restart = d.State
	switch {
	case d.Action == policies.RestartGiveUp:
		e.Managed, e.Cancelled, e.RetryAt, e.RetryStop = false, true, time.Time{}, false
		h.event(ctx, e.Process, EventCancelRestart,
			fmt.Sprintf("gave up after %d restarts (%s); manage it again with op_type 3 or a start", e.Restart.Attempts, why), e.Pid)
	case d.Delay > 0:
		e.RetryAt = workflow.Now(ctx).Add(d.Delay)
		if d.CrashLoop {
			h.event(ctx, e.Process, EventRestartDelayed, fmt.Sprintf("%s; it died %d times in a row within %s of a start: next start in %s",
				why, e.Restart.Crashes, policies.StableRun, d.Delay.Round(time.Second)), e.Pid)
		}
	default:
		h.attempt(ctx, e, op, why)
	}
}

// attempt starts a supervised process once (stopping it first when it is
// alive but unhealthy) and records the outcome as it was.
func (h *host) attempt(ctx workflow.Context, e *Entry, op proc.OpType, why string) {
	e.RetryAt = time.Time{}
	e.Restart = e.Restart.Started()
	if e.RetryStop {
		stop := h.runOp(ctx, HostRequest{Op: proc.OpStop, Target: h.target(), Process: e.Process}, *e)
		e.saw(stop, workflow.Now(ctx))
		if stop.Result.Code != proc.CodeSuccess && stop.Result.Code != proc.CodeNotRunning {
			h.event(ctx, e.Process, EventRestartFailed, "stop before the restart: "+stop.Result.Message, e.Pid)
			h.restart(ctx, e, op, why)
			return
		}
		e.RetryStop = false
	}
	out := h.runOp(ctx, HostRequest{Op: op, Target: h.target(), Process: e.Process}, *e)
	e.saw(out, workflow.Now(ctx))
	switch out.Result.Code {
	case proc.CodeSuccess, proc.CodeAlreadyRunning:
		// It passed its start check, or is running already: it stayed up.
		e.Restart = e.Restart.StayedUp(workflow.Now(ctx))
		if out.Alive {
			e.Pid, e.StartTicks = out.Pid, out.StartTicks
		}
		if out.Result.Code == proc.CodeAlreadyRunning {
			// Nothing was started: say so, never "restarted".
			h.event(ctx, e.Process, EventFoundRunning, fmt.Sprintf("%s; found running again, pid %d, before supervision started it", why, e.Pid), e.Pid)
			return
		}
		e.LastStartTime = workflow.Now(ctx).Unix()
		h.event(ctx, e.Process, EventRestartSuccess, fmt.Sprintf("%s; pid %d", why, e.Pid), e.Pid)
		return
	}
	h.event(ctx, e.Process, EventRestartFailed, out.Result.Message, e.Pid)
	h.restart(ctx, e, op, why)
}

// runDue runs restarts whose backoff is over and periodic runs that are
// due; it reports whether it did anything.
func (h *host) runDue(ctx workflow.Context) bool {
	now := workflow.Now(ctx)
	for i := range h.Entries {
		e := &h.Entries[i]
		if !e.Managed || e.Cancelled {
			continue
		}
		if !e.RetryAt.IsZero() && !now.Before(e.RetryAt) {
			h.attempt(ctx, e, proc.OpStart, "retry after backoff")
			return true
		}
		if e.Spec.AutoType == proc.AutoPeriodic {
			h.schedule(e, now)
			if !e.NextRun.IsZero() && !now.Before(e.NextRun) {
				h.runPeriodic(ctx, e, now)
				return true
			}
		}
	}
	return false
}

// schedule sets a periodic entry's next run if it has none.
func (h *host) schedule(e *Entry, now time.Time) {
	if !e.NextRun.IsZero() {
		return
	}
	next, err := policies.NextRun(e.Spec, e.LastRun, now, h.Zone)
	if err != nil {
		return
	}
	e.NextRun = next
}

// runPeriodic runs a periodic process for its next scheduled time, unless
// its previous run is still going. Timers are durable, so a run that fell
// due while no worker ran is run late, once: runs are neither lost nor
// doubled. An outage longer than policies.MaxCatchUp runs is not replayed
// in full; the runs beyond it are recorded as skipped.
func (h *host) runPeriodic(ctx workflow.Context, e *Entry, now time.Time) {
	scheduled := e.NextRun
	out := h.runOp(ctx, HostRequest{Op: proc.OpStart, Target: h.target(), Process: e.Process}, *e)
	e.saw(out, workflow.Now(ctx))
	at := scheduled.UTC().Format(time.RFC3339Nano)
	switch out.Result.Code {
	case proc.CodeSuccess:
		e.LastStartTime = now.Unix()
		h.eventAt(ctx, e.Process, EventPeriodicRun, "run scheduled for "+at, out.Pid, scheduled)
	case proc.CodeAlreadyRunning:
		h.eventAt(ctx, e.Process, EventPeriodicSkip, "previous run still running at "+at+": "+out.Result.Message, out.Pid, scheduled)
	default:
		h.eventAt(ctx, e.Process, EventPeriodicFailed, out.Result.Message, 0, scheduled)
	}
	e.LastRun, e.NextRun = scheduled, time.Time{}
	h.schedule(e, now)
	if skip, from, last, next := policies.CatchUp(e.Spec, e.NextRun, now, h.Zone); skip > 0 {
		h.eventAt(ctx, e.Process, EventPeriodicSkip, fmt.Sprintf("%d runs missed during an outage, from %s", skip,
			from.UTC().Format(time.RFC3339)), 0, from)
		e.LastRun, e.NextRun = last, next
	}
}

// nextWake is the earliest pending restart or periodic run.
func (h *host) nextWake(now time.Time) (time.Time, bool) {
	var best time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	for i := range h.Entries {
		e := &h.Entries[i]
		if !e.Managed || e.Cancelled {
			continue
		}
		consider(e.RetryAt)
		if e.Spec.AutoType == proc.AutoPeriodic {
			h.schedule(e, now)
			consider(e.NextRun)
		}
	}
	if best.IsZero() {
		return best, false
	}
	if best.Before(now) {
		best = now
	}
	return best, true
}

// event records what supervision did; the newest is also the workflow's
// memo, so the Temporal UI shows it.
func (h *host) event(ctx workflow.Context, p proc.ProcessID, kind, detail string, pid int) {
	h.eventAt(ctx, p, kind, detail, pid, time.Time{})
}

// eventAt records an event of a scheduled (periodic) run.
func (h *host) eventAt(ctx workflow.Context, p proc.ProcessID, kind, detail string, pid int, scheduled time.Time) {
	ev := Event{Time: workflow.Now(ctx), Host: h.Host, Process: p, Kind: kind, Detail: detail, Pid: pid, Scheduled: scheduled}
	h.Events = append(h.Events, ev)
	if len(h.Events) > maxEvents {
		h.Events = h.Events[len(h.Events)-maxEvents:]
	}
	_ = workflow.UpsertMemo(ctx, map[string]any{LastEventMemo: ev})
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"event": kind}).Counter(SupervisionEventsMetric).Inc(1)
}
