package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// ctlBreakdown splits a control op's time by the task's history (its
// Deliver batches) and its hosts' histories (each host's op update).
func (e *env) ctlBreakdown(ctx context.Context, began time.Time, took time.Duration, hosts []*testbed.Host, r *droverCtlRun) error {
	id, tr, err := e.latestRun(ctx, began)
	if err != nil {
		return err
	}
	start, end := tr.start, tr.end
	var firstBatch, lastBatch time.Time
	for _, a := range tr.acts {
		if a.name != "Deliver" {
			continue
		}
		r.Batches++
		if !a.started.IsZero() && (firstBatch.IsZero() || a.started.Before(firstBatch)) {
			firstBatch = a.started
		}
		if a.completed.After(lastBatch) {
			lastBatch = a.completed
		}
		if !a.completed.IsZero() {
			r.Batch = max(r.Batch, a.completed.Sub(a.scheduled).Seconds())
		}
	}
	r.TaskTasks = tr.workflowTasks
	if firstBatch.IsZero() || lastBatch.IsZero() || end.IsZero() {
		return fmt.Errorf("task %s: no Deliver batch and close in its history", id)
	}
	r.ToStart = start.Sub(began).Seconds()
	r.ToDeliver = firstBatch.Sub(start).Seconds()
	r.Delivering = lastBatch.Sub(firstBatch).Seconds()
	r.Closed = end.Sub(lastBatch).Seconds()
	r.Fetch = began.Add(took).Sub(end).Seconds()

	phases := make([]hostPhases, len(hosts))
	errs := eachHost(hosts, func(i int, h *testbed.Host) error {
		evs, err := e.history(ctx, workflows.HostWorkflowID(proc.HostID{IP: h.IP}))
		if dir := os.Getenv("BENCH_DUMP_HISTORY"); err == nil && dir != "" && i < 3 {
			dumpHistory(filepath.Join(dir, fmt.Sprintf("%02d-%s-%d.txt", len(e.ctlRuns), r.Op, i)), evs, start)
		}
		if err == nil {
			phases[i], err = hostOpPhases(evs, id+"#", start)
		}
		if err != nil {
			return fmt.Errorf("host %s: %w", h.IP, err)
		}
		return nil
	})
	// A host whose workflow has continued as new since the op keeps it
	// in its earlier run: the phases are of the hosts that have it.
	var found []hostPhases
	var firstErr error
	for i, err := range errs {
		if err == nil {
			found = append(found, phases[i])
		} else if firstErr == nil {
			firstErr = err
		}
	}
	if len(found) == 0 {
		return firstErr
	}
	if missing := len(hosts) - len(found); missing > 0 {
		log.Printf("  %s: %d of %d hosts' current histories lack the op; phases are of the others", r.Op, missing, len(hosts))
	}
	phases = found
	pick := func(f func(hostPhases) float64) [2]float64 {
		xs := make([]float64, len(phases))
		for i, p := range phases {
			xs[i] = f(p)
		}
		sort.Float64s(xs)
		return [2]float64{median(xs), xs[len(xs)-1]}
	}
	r.Taken = pick(func(p hostPhases) float64 { return p.taken })
	r.Ran = pick(func(p hostPhases) float64 { return p.ran })
	r.Answered = pick(func(p hostPhases) float64 { return p.answered })
	r.Answer = pick(func(p hostPhases) float64 { return p.taken + p.ran + p.answered })
	r.HostTasks = int(pick(func(p hostPhases) float64 { return float64(p.tasks) })[0])
	for _, p := range phases {
		if p.handedOver {
			r.HandedOver++
		}
	}
	return nil
}

// hostPhases is one host's op, from its history.
type hostPhases struct {
	taken, ran, answered float64
	tasks                int
	handedOver           bool
}

// hostOpPhases finds in a host's history the op update of the task whose
// request ids begin with prefix (the task started at start): the workflow
// task that took it, the op's end, the update's completion. The update is
// accepted in the workflow task that runs the op as a local activity, so
// its acceptance is written with the op's end; the task's start is when the
// host took the request.
func hostOpPhases(evs []*historypb.HistoryEvent, prefix string, start time.Time) (hostPhases, error) {
	var p hostPhases
	var taskStarted, took, done, answered time.Time
	var updateID string
	var hostOp int64
	var completed []time.Time // workflow tasks
	for _, ev := range evs {
		t := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			taskStarted = t
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			id := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetMeta().GetUpdateId()
			if updateID == "" && strings.HasPrefix(id, prefix) {
				updateID, took = id, taskStarted
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if updateID != "" && answered.IsZero() && ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
				done = t
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if updateID != "" && answered.IsZero() && ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "HostOp" {
				p.handedOver, hostOp = true, ev.GetEventId()
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if hostOp != 0 && ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId() == hostOp {
				done = t
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
			if updateID != "" && answered.IsZero() && ev.GetWorkflowExecutionUpdateCompletedEventAttributes().GetMeta().GetUpdateId() == updateID {
				answered = t
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			completed = append(completed, t)
		}
	}
	if updateID == "" || answered.IsZero() || done.IsZero() {
		return p, fmt.Errorf("no op update %s… accepted, run and completed in its history after %s", prefix, start.Format(time.RFC3339Nano))
	}
	for _, t := range completed {
		if !t.Before(took) && !t.After(answered) {
			p.tasks++
		}
	}
	p.taken, p.ran, p.answered = took.Sub(start).Seconds(), done.Sub(took).Seconds(), answered.Sub(done).Seconds()
	return p, nil
}

// dumpHistory writes a host's events from 10 s before start, one a line,
// with their time from start: BENCH_DUMP_HISTORY, a look at one op.
func dumpHistory(path string, evs []*historypb.HistoryEvent, start time.Time) {
	var b strings.Builder
	for _, ev := range evs {
		t := ev.GetEventTime().AsTime()
		if t.Before(start.Add(-10 * time.Second)) {
			continue
		}
		fmt.Fprintf(&b, "%+8.3f %s\n", t.Sub(start).Seconds(), ev.GetEventType())
	}
	_ = os.WriteFile(path, []byte(b.String()), 0o644)
}
