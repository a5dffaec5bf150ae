package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// victim is one supervised process killed on purpose, and what became of it.
type victim struct {
	host *testbed.Host
	p    int
	at   time.Time // killed
	took float64   // kill → process_restart_success, seconds; 0 while not back
	// From the host's history: kill → the first event after it (the watch
	// telling the host workflow), and the restart's activity on the host.
	detect, hostOp float64
}

// killAndTimeFleet SIGKILLs every victim's process (by its pid file, from
// this side of the hosts' /data) and waits up to limit for each one's
// process_restart_success, then splits each restart's time by its host's
// history.
func (e *env) killAndTimeFleet(ctx context.Context, victims []*victim, limit time.Duration) (restartTimes, error) {
	var out restartTimes
	for _, v := range victims {
		pid, err := fleetPid(v.host, v.p)
		if err != nil {
			return out, err
		}
		v.at = time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return out, fmt.Errorf("kill %s %s (pid %d): %w", v.host.IP, fleetName(v.p), pid, err)
		}
	}
	out.Killed = len(victims)
	byHost := map[*testbed.Host][]*victim{}
	var hosts []*testbed.Host
	for _, v := range victims {
		if byHost[v.host] == nil {
			hosts = append(hosts, v.host)
		}
		byHost[v.host] = append(byHost[v.host], v)
	}
	deadline := time.Now().Add(limit)
	for back := 0; back < len(victims) && time.Now().Before(deadline); {
		if err := sleepCtx(ctx, time.Second); err != nil {
			return out, err
		}
		back = 0
		for _, h := range hosts {
			pending := false
			for _, v := range byHost[h] {
				pending = pending || v.took == 0
			}
			if !pending {
				back += len(byHost[h])
				continue
			}
			var evs []workflows.Event
			// A host workflow busy restarting may not answer in time; it
			// is asked again on the next pass.
			if _, err := engine.QueryOpen(ctx, e.client, workflows.HostWorkflowID(proc.HostID{IP: h.IP}), workflows.EventsQuery, &evs); err != nil {
				continue
			}
			for _, v := range byHost[h] {
				for _, ev := range evs {
					if v.took == 0 && ev.Process.Name == fleetName(v.p) && ev.Kind == workflows.EventRestartSuccess && ev.Time.After(v.at) {
						v.took = ev.Time.Sub(v.at).Seconds()
					}
				}
				if v.took > 0 {
					back++
				}
			}
		}
	}
	for _, h := range hosts {
		if err := e.splitRestarts(ctx, h, byHost[h]); err != nil {
			return out, err
		}
	}
	e.logNotBack(ctx, victims)
	var took, detect, engine, hostOp []float64
	for _, v := range victims {
		if v.took == 0 {
			continue
		}
		out.Restarted++
		took = append(took, v.took)
		detect = append(detect, v.detect)
		hostOp = append(hostOp, v.hostOp)
		engine = append(engine, max(v.took-v.detect-v.hostOp, 0))
	}
	if len(took) > 0 {
		t, d, g, o := sortedSecs(took), sortedSecs(detect), sortedSecs(engine), sortedSecs(hostOp)
		out.P50, out.P95, out.Max = percentile(t, 50), percentile(t, 95), t[len(t)-1]
		out.DetectP50, out.DetectP95 = percentile(d, 50), percentile(d, 95)
		out.EngineP50, out.EngineP95 = percentile(g, 50), percentile(g, 95)
		out.HostOpP50, out.HostOpP95 = percentile(o, 50), percentile(o, 95)
	}
	logf("%d of %d back; kill → restarted p50 %.1f s, p95 %.1f s (detection p50 %.1f s, engine p50 %.1f s, on the host p50 %.1f s)",
		out.Restarted, out.Killed, out.P50, out.P95, out.DetectP50, out.EngineP50, out.HostOpP50)
	return out, nil
}

// splitRestarts reads a host's history after its first victim's kill: the
// first event after the kill is supervision telling the host workflow
// (a watch's completion or a signal: a quiet host has no other), and the
// first activity it then ran is the start on the host.
func (e *env) splitRestarts(ctx context.Context, h *testbed.Host, vs []*victim) error {
	evs, err := e.history(ctx, workflows.HostWorkflowID(proc.HostID{IP: h.IP}))
	if err != nil {
		return err
	}
	at := vs[0].at
	var told, started time.Time
	for _, ev := range evs {
		t := ev.GetEventTime().AsTime()
		if !t.After(at) {
			continue
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if told.IsZero() {
				told = t
			} else if !started.IsZero() {
				for _, v := range vs {
					v.hostOp = t.Sub(started).Seconds()
				}
				return setDetect(vs, told)
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if !told.IsZero() && started.IsZero() {
				started = t
			}
		}
	}
	return setDetect(vs, told)
}

func setDetect(vs []*victim, told time.Time) error {
	if told.IsZero() {
		return nil
	}
	for _, v := range vs {
		v.detect = told.Sub(v.at).Seconds()
	}
	return nil
}

// lossWithin counts the victims running again within bound.
func lossWithin(vs []*victim, bound time.Duration) int {
	n := 0
	for _, v := range vs {
		if v.took > 0 && v.took <= bound.Seconds() {
			n++
		}
	}
	return n
}

// logNotBack says, for each victim not back within the limit, what its
// host recorded of it since the kill: the reason is in those events.
func (e *env) logNotBack(ctx context.Context, victims []*victim) {
	for _, v := range victims {
		if v.took > 0 {
			continue
		}
		var evs []workflows.Event
		_, err := engine.QueryOpen(ctx, e.client, workflows.HostWorkflowID(proc.HostID{IP: v.host.IP}), workflows.EventsQuery, &evs)
		seen := ""
		for _, ev := range evs {
			if ev.Process.Name == fleetName(v.p) && ev.Time.After(v.at) {
				seen += fmt.Sprintf("; +%.1fs %s %s", ev.Time.Sub(v.at).Seconds(), ev.Kind, ev.Detail)
			}
		}
		if err != nil {
			seen = "; events not read: " + err.Error()
		}
		logf("not back: %s %s%s", v.host.IP, fleetName(v.p), seen)
	}
}
