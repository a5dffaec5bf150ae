package workflows

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// Each test drives one supervision decision through the Host workflow with
// the host faked (see rig), on the test suite's skipped clock.

func TestSuperviseDeadProcessIsStartedAgain(t *testing.T) {
	r := newRig(t)
	r.watches = []watchAnswer{dies()}
	st := r.run(managed(nil))
	r.wantOps(proc.OpStart)
	wantEvents(t, st, EventRestartSuccess)
	if e := st.Entries[0]; !e.Managed || e.Pid != 4242 || e.Restart.Attempts != 0 {
		t.Fatalf("after a good restart: %+v", e)
	}
	if len(r.watched) != 2 {
		t.Fatalf("supervision must go on watching after the restart: %d watches", len(r.watched))
	}
}

func TestSuperviseGivesUpAfterStartRetries(t *testing.T) {
	r := newRig(t)
	r.watches = []watchAnswer{dies()}
	r.hostOp = func(activities.HostOpInput) activities.HostOpOutput {
		return answer(proc.CodePostCheck, "start process (svc) failed, for post-check status not alive")
	}
	st := r.run(managed(nil)) // start_retries 3, start_interval 10 s
	r.wantOps(proc.OpStart, proc.OpStart, proc.OpStart)
	wantEvents(t, st, EventRestartFailed, EventRestartFailed, EventRestartFailed, EventCancelRestart)
	if g := r.gaps(); g[0] < 10*time.Second || g[1] < 20*time.Second {
		t.Fatalf("failed starts must back off from start_interval, doubling: gaps %v", g)
	}
	if e := st.Entries[0]; e.Managed || !e.Cancelled {
		t.Fatalf("given up on, it is no longer managed: %+v", e)
	}
	if len(r.watched) != 1 {
		t.Fatalf("a process given up on is not watched: %d watches", len(r.watched))
	}
}

// TestSuperviseCrashLoopBacksOff: a process that passes its start check
// and dies again right after is started again at once the first time,
// then after a delay that doubles, capped, and never given up on.
func TestSuperviseCrashLoopBacksOff(t *testing.T) {
	r := newRig(t)
	for range 8 {
		r.watches = append(r.watches, dies())
	}
	st := r.run(managed(nil))
	var starts int
	for _, op := range r.opKinds() {
		if op == proc.OpStart {
			starts++
		}
	}
	if starts != 8 {
		t.Fatalf("every death is answered with a start: %d starts for 8 deaths", starts)
	}
	// The first death follows a run supervision did not start, the second
	// is the first quick one: both are repaired at once. Each later one
	// waits start_interval, doubled per crash, capped, plus jitter.
	g := r.gaps()
	if g[0] != 0 {
		t.Fatalf("the first deaths are repaired at once: gaps %v", g)
	}
	base := 10 * time.Second
	for i := 1; i < len(g); i++ {
		if g[i] < base || g[i] > base+base/4 {
			t.Fatalf("crash-loop delay %d is %s, want %s plus at most a quarter: %v", i, g[i], base, g)
		}
		base = min(2*base, policies.MaxRestartDelay)
	}
	if base != policies.MaxRestartDelay {
		t.Fatalf("a long crash loop reaches the cap: %v", g)
	}
	delayed := 0
	for _, ev := range st.Events {
		switch ev.Kind {
		case EventRestartDelayed:
			delayed++
		case EventCancelRestart:
			t.Fatalf("a crash loop is never given up on: %s", describe(st.Events))
		}
	}
	if delayed != 6 || !st.Entries[0].Managed {
		t.Fatalf("each delayed start is recorded (%d of 6), and it stays managed:\n%s", delayed, describe(st.Events))
	}
}

// TestSuperviseStableRunClearsTheCrashLoop: a death long after the last
// start is a new crash, repaired at once.
func TestSuperviseStableRunClearsTheCrashLoop(t *testing.T) {
	r := newRig(t)
	r.watches = []watchAnswer{dies(), dies(), dies()}
	// The third death comes after a stable run.
	r.env.SetStartTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	r.hostOp = func(in activities.HostOpInput) activities.HostOpOutput { return success(in) }
	e := managed(nil)
	e.Restart = policies.RestartState{Crashes: 5, UpSince: time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC)}
	r.run(e)
	if g := r.gaps(); len(g) != 2 || g[0] != 0 || g[1] < 10*time.Second {
		t.Fatalf("a death after a stable run is repaired at once, the next quick one not: gaps %v", g)
	}
}

func TestSuperviseLimitStopsThenStarts(t *testing.T) {
	r := newRig(t)
	r.watches = []watchAnswer{watchSays(activities.WatchLimit)}
	st := r.run(managed(nil))
	r.wantOps(proc.OpStop, proc.OpStart)
	wantEvents(t, st, EventLimitExceed, EventRestartSuccess)
}

// TestSuperviseUnhealthyIsStoppedThenStarted: an alive but unhealthy
// process gets a real restart, recorded as what it was.
func TestSuperviseUnhealthyIsStoppedThenStarted(t *testing.T) {
	r := newRig(t)
	r.watches = []watchAnswer{watchSays(activities.WatchUnhealthy)}
	st := r.run(managed(nil))
	r.wantOps(proc.OpStop, proc.OpStart)
	wantEvents(t, st, EventRestartSuccess)
}

// TestSuperviseUnhealthyStopFailureIsRetried: a stop that fails is
// recorded as a failed restart and retried, stop first, after the backoff.
func TestSuperviseUnhealthyStopFailureIsRetried(t *testing.T) {
	r := newRig(t)
	r.watches = []watchAnswer{watchSays(activities.WatchUnhealthy)}
	stops := 0
	r.hostOp = func(in activities.HostOpInput) activities.HostOpOutput {
		if in.Op == proc.OpStop {
			if stops++; stops == 1 {
				return answer(proc.CodePostCheck, "stop process (svc) failed, for post-check status still alive, pid 4241")
			}
		}
		return success(in)
	}
	st := r.run(managed(nil))
	r.wantOps(proc.OpStop, proc.OpStop, proc.OpStart)
	wantEvents(t, st, EventRestartFailed, EventRestartSuccess)
	if g := r.gaps(); g[0] < 10*time.Second {
		t.Fatalf("the retry waits start_interval: %v", g)
	}
}

// TestSuperviseNeverCallsAnAnswered828ARestart: a start that finds the
// process running restarted nothing, and says so.
func TestSuperviseNeverCallsAnAnswered828ARestart(t *testing.T) {
	r := newRig(t)
	r.watches = []watchAnswer{dies()}
	r.hostOp = func(activities.HostOpInput) activities.HostOpOutput {
		out := answer(proc.CodeAlreadyRunning, "process(svc) is already running, pid 4300")
		out.Alive, out.Pid = true, 4300
		return out
	}
	st := r.run(managed(nil))
	r.wantOps(proc.OpStart)
	wantEvents(t, st, EventFoundRunning)
	if st.Entries[0].Pid != 4300 {
		t.Fatalf("the running pid is kept: %+v", st.Entries[0])
	}
}

// TestSuperviseReportsDriftOncePerChange: the watch is told what was
// reported, so a drift is reported once, and again when it is restored.
func TestSuperviseReportsDriftOncePerChange(t *testing.T) {
	r := newRig(t)
	r.watches = []watchAnswer{watchSays(activities.WatchDrift, "/data/app/app.conf"), watchSays(activities.WatchDrift)}
	st := r.run(managed(nil))
	r.wantOps()
	wantEvents(t, st, EventConfigDrift, EventConfigRestored)
	if d := r.watched[1].in.Entries[0].Drifted; len(d) != 1 || d[0] != "/data/app/app.conf" {
		t.Fatalf("the next watch must know the drift was reported: %v", d)
	}
	if d := r.watched[2].in.Entries[0].Drifted; len(d) != 0 {
		t.Fatalf("and that it was restored: %v", d)
	}
}

// TestSuperviseFailedWatchPausesThenResumes: a watch that fails outright
// is recorded, pauses supervision of the host for WatchFailureBackoff,
// and supervision then resumes and acts.
func TestSuperviseFailedWatchPausesThenResumes(t *testing.T) {
	r := newRig(t)
	r.watches = []watchAnswer{watchFails(), dies()}
	st := r.run(managed(nil))
	wantEvents(t, st, EventWatchFailed, EventRestartSuccess)
	if gap := r.watched[1].at.Sub(r.watched[0].at); gap < policies.WatchFailureBackoff {
		t.Fatalf("the next watch came %s after the failed one, before the %s pause", gap, policies.WatchFailureBackoff)
	}
	r.wantOps(proc.OpStart)
}

func periodic(last time.Time) Entry {
	e := managed(func(s *proc.Spec) { s.AutoType, s.CycleTime = proc.AutoPeriodic, time.Minute })
	e.LastRun = last
	return e
}

// TestPeriodicRunIsSkippedWhileThePreviousGoesOn: a run that finds the
// previous one still running (828) is recorded as skipped; the next runs.
func TestPeriodicRunIsSkippedWhileThePreviousGoesOn(t *testing.T) {
	r := newRig(t)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	r.env.SetStartTime(now)
	runs := 0
	r.hostOp = func(in activities.HostOpInput) activities.HostOpOutput {
		if runs++; runs == 1 {
			return answer(proc.CodeAlreadyRunning, "process(svc) is already running, pid 4241")
		}
		return success(in)
	}
	// The watch never sees anything; the runs fall due on timers.
	r.idle, r.endAt = true, 90*time.Second
	st := r.run(periodic(now.Add(-30 * time.Second)))
	if len(st.Events) < 2 || st.Events[0].Kind != EventPeriodicSkip || st.Events[1].Kind != EventPeriodicRun {
		t.Fatalf("want a skip, then a run:\n%s", describe(st.Events))
	}
	if g := r.gaps(); g[0] != time.Minute {
		t.Fatalf("runs are cycle_time apart: %v", g)
	}
}

// TestPeriodicCatchUpAfterAnOutage: runs missed while no worker ran are
// run late, at most MaxCatchUp of them, and the rest recorded as skipped:
// an outage never causes a burst.
func TestPeriodicCatchUpAfterAnOutage(t *testing.T) {
	r := newRig(t)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	r.env.SetStartTime(now)
	r.idle, r.endAt = true, time.Second
	st := r.run(periodic(now.Add(-10*time.Minute - 30*time.Second)))
	late := 0
	for _, c := range r.ops {
		if c.at.Equal(now) {
			late++
		}
	}
	if late != policies.MaxCatchUp+1 {
		t.Fatalf("%d runs at once after the outage, want %d:\n%s", late, policies.MaxCatchUp+1, describe(st.Events))
	}
	skipped := 0
	for _, ev := range st.Events {
		if ev.Kind == EventPeriodicSkip {
			skipped++
		}
	}
	if skipped != 1 {
		t.Fatalf("the runs beyond the catch-up are recorded as skipped, once:\n%s", describe(st.Events))
	}
}

// TestCrontabRunsInTheHostZone: once the watch reports the host's zone,
// crontab rules are read in it: "0 9 * * *" on a UTC+8 host runs at
// 01:00 UTC, not at 09:00 UTC.
func TestCrontabRunsInTheHostZone(t *testing.T) {
	r := newRig(t)
	start := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	r.env.SetStartTime(start)
	zone := policies.Zone{Name: "CST", Offset: 8 * 3600, Known: true}
	r.watches = []watchAnswer{{out: activities.WatchOutput{Zone: &zone}}}
	r.idle, r.endAt = true, 2*time.Hour
	e := managed(func(s *proc.Spec) { s.AutoType, s.CrontabRule = proc.AutoPeriodic, "0 9 * * *" })
	st := r.run(e)
	r.wantOps(proc.OpStart)
	if at := r.ops[0].at; !at.Equal(start.Add(time.Hour)) {
		t.Fatalf("the 09:00 run in UTC+8 ran at %s, want 01:00 UTC", at.UTC())
	}
	if st.Zone != zone {
		t.Fatalf("the zone is kept for the next run: %+v", st.Zone)
	}
	if got := r.watched[1].in.Zone; got != zone {
		t.Fatalf("the next watch is told the zone in use, so it reports only a change: %+v", got)
	}
}

// TestWatchRunsOnItsOwnQueue: watches are scheduled on the watch queue
// the worker names (by default the host's queue + "-watch"), never on
// the ops' queue, with the heartbeat timeout sized for the server's cost.
func TestWatchRunsOnItsOwnQueue(t *testing.T) {
	for _, named := range []string{"", "watches"} {
		r := newRig(t)
		r.watches = []watchAnswer{dies()}
		var queues []string
		var heartbeats []time.Duration
		r.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
			if info.ActivityType.Name == "Watch" {
				queues = append(queues, info.TaskQueue)
				heartbeats = append(heartbeats, info.HeartbeatTimeout)
			}
		})
		st := managed(nil)
		r.execute(HostState{Host: proc.HostID{IP: "10.0.0.1"}, Entries: []Entry{st},
			Supervision: Supervision{WatchQueue: named}})
		want := named
		if want == "" {
			want = "default-test-taskqueue" + WatchQueueSuffix
		}
		if len(queues) < 2 || queues[0] != want || queues[1] != want || heartbeats[0] != policies.WatchHeartbeatTimeout {
			t.Fatalf("watch queue %q: watches ran on %v with heartbeat timeouts %v, want %s and %s", named, queues, heartbeats, want, policies.WatchHeartbeatTimeout)
		}
	}
}
