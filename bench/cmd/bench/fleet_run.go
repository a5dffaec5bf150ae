package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// fleetCost runs the fleet part: f.procs managed processes on each of
// f.hosts hosts, supervised by f.workers worker processes.
func (e *env) fleetCost(ctx context.Context, f fleetSettings) (*fleetResult, error) {
	bed := e.bed.Hosts[:f.hosts]
	r := &fleetResult{fleetSettings: f, OpSDKToStart: -1}
	logf("a resident agent's floor: monit checking %d processes every second", f.procs)
	r.Resident = residentFloor(ctx, e.dir, f.procs, 30*time.Second)
	if err := installFleet(bed, f.procs); err != nil {
		return r, err
	}
	var workers []*workerProc
	defer func() {
		for _, w := range workers {
			w.kill()
		}
	}()
	for i := 0; i < f.workers; i++ {
		w, err := e.startWorkerProc(f, i)
		if err != nil {
			return r, err
		}
		workers = append(workers, w)
	}
	logf("%d worker processes; starting %d processes on %d hosts", len(workers), f.hosts*f.procs, f.hosts)
	began := time.Now()
	if err := e.fleetStart(ctx, bed, f.procs); err != nil {
		return r, err
	}
	r.StartTook = time.Since(began)
	logf("started in %s; waiting for two polls of every host", r.StartTook.Round(time.Second))
	execs := func() float64 { return sumMetric(workers, "drover_ssh_execs_total") }
	base := execs()
	if !sleepUntil(ctx, 5*time.Minute, func() bool { return execs() >= base+2*float64(f.hosts) }) {
		return r, fmt.Errorf("supervision never polled every host twice: %.0f execs in 5 minutes for %d hosts", execs()-base, f.hosts)
	}

	// The quiet window. History lengths are read outside it: their
	// describes are requests too.
	lenBefore, err := e.hostHistoryLengths(ctx, bed)
	if err != nil {
		return r, err
	}
	// The server publishes its counters every second or so: the describes
	// above must land before the window's first reading.
	if err := sleepCtx(ctx, 3*time.Second); err != nil {
		return r, err
	}
	snap0 := e.serverSnapshot()
	execs0, host0 := execs(), hostsCPU(bed)
	cpu0 := make([]float64, len(workers))
	for i, w := range workers {
		cpu0[i], _ = w.cpuAndRSS()
	}
	t0 := time.Now()
	logf("quiet for %s", f.quiet)
	if err := sleepCtx(ctx, f.quiet); err != nil {
		return r, err
	}
	r.Quiet = time.Since(t0)
	// The same lag at the end: the window's last requests land now.
	if err := sleepCtx(ctx, 3*time.Second); err != nil {
		return r, err
	}
	used := usedBetween(snap0, e.serverSnapshot(), e.cfg.TemporalNamespace)
	r.Requests = used.Requests
	r.ServerOwn = total(used.Own) / r.Quiet.Seconds()
	execsQ, hostQ := execs()-execs0, hostsCPU(bed)-host0
	for i, w := range workers {
		cpu, mem := w.cpuAndRSS()
		r.WorkerCores = append(r.WorkerCores, (cpu-cpu0[i])/r.Quiet.Seconds())
		r.WorkerRSSMiB = append(r.WorkerRSSMiB, mem)
	}
	lenAfter, err := e.hostHistoryLengths(ctx, bed)
	if err != nil {
		return r, err
	}
	total := 0.0
	for _, v := range r.Requests {
		total += v
	}
	r.ReqPerSecPer1000 = total / r.Quiet.Seconds() / float64(f.hosts) * 1000
	r.HostPolls = float64(f.hosts) * r.Quiet.Seconds() / f.interval.Seconds()
	r.ExecsPerPoll = execsQ / r.HostPolls
	r.HostMsPerPoll = hostQ / execsQ * 1000
	grown := 0
	for i := range lenBefore {
		grown += lenAfter[i] - lenBefore[i]
	}
	r.EventsPerPoll = float64(grown) / r.HostPolls
	logf("quiet: %.2f requests/s per 1,000 hosts, %.2f execs per host-poll, %.2f events per host-poll", r.ReqPerSecPer1000, r.ExecsPerPoll, r.EventsPerPoll)

	expect := map[fleetKey]int{} // restarts each process should have had
	if err := e.fleetOpWait(ctx, bed, workers, r, expect); err != nil {
		return r, err
	}

	// A tenth of the processes die at once.
	var mass []*victim
	for i := 0; i < f.hosts*f.procs; i += 10 {
		h := i / f.procs
		mass = append(mass, &victim{host: bed[h], p: (i + h) % f.procs})
	}
	logf("killing %d processes at once", len(mass))
	if r.Mass, err = e.killAndTimeFleet(ctx, mass, 3*time.Minute); err != nil {
		return r, err
	}

	// A third worker joins, then one of the first is SIGKILLed and a
	// process on every tenth host is killed: those whose watch the lost
	// worker held are restarted only after another takes the watch up.
	if w, err := e.startWorkerProc(f, len(workers)); err == nil {
		workers = append(workers, w)
	} else {
		return r, err
	}
	base = execs()
	sleepUntil(ctx, 2*f.interval, func() bool { return false })
	workers[0].kill()
	var loss []*victim
	for i := 5; i < f.hosts; i += 10 {
		loss = append(loss, &victim{host: bed[i], p: (i / 10) % f.procs})
	}
	r.LossBound = f.interval + fleetCheck + 60*time.Second
	logf("killed worker 0 of %d; killing %d processes", len(workers), len(loss))
	if r.Loss, err = e.killAndTimeFleet(ctx, loss, r.LossBound+time.Minute); err != nil {
		return r, err
	}
	r.LossWithin = lossWithin(loss, r.LossBound)

	// Each process was started once, once more by the op, and once more
	// for each time it was killed; more is a double start.
	for _, v := range append(mass, loss...) {
		expect[fleetKey{v.host, v.p}]++
	}
	for _, h := range bed {
		for p := 0; p < f.procs; p++ {
			k := fleetKey{h, p}
			n, want := fleetStarts(h, p), expect[k]+1
			switch {
			case n > want && want > 1:
				r.DoubleStarts++
			case n > want:
				r.UnexpectedRun++
			}
		}
	}
	return r, nil
}

// fleetStart starts every process on its host with the spec's own
// start_cmd (one exec per host, noted in its starts.log like any start),
// then puts them all under supervision through drover with op_type 3
// (register as managed, inline spec), 100 hosts per task and four tasks at
// a time. This part measures supervision: 20,000 starts through drover
// would spend most of the run on the write path, which the control and
// fleetops parts measure.
func (e *env) fleetStart(ctx context.Context, hosts []*testbed.Host, procs int) error {
	err := forHosts(hosts, func(h *testbed.Host) error {
		var script strings.Builder
		for p := 0; p < procs; p++ {
			spec := fleetSpec(h, p)
			fmt.Fprintf(&script, "(cd %s && %s) || exit 1\n", spec.SetupPath, spec.StartCmd)
		}
		_, err := h.Exec(script.String())
		return err
	})
	if err != nil {
		return fmt.Errorf("start on the hosts: %w", err)
	}
	const per = 100
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := 0; i < len(hosts); i += per {
		var items []proc.Item
		for _, h := range hosts[i:min(i+per, len(hosts))] {
			for p := 0; p < procs; p++ {
				spec := fleetSpec(h, p)
				items = append(items, proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: fleetNS, Name: fleetName(p)}, Spec: &spec})
			}
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			res, err := e.operateOn(ctx, fleetQueue, proc.OpRegister, items)
			if err == nil {
				err = allSucceeded("register as managed", res)
			}
			mu.Lock()
			if err != nil && first == nil {
				first = err
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return first
}

// operateOn runs one op on a task queue and waits for it.
func (e *env) operateOn(ctx context.Context, queue string, op proc.OpType, items []proc.Item) (workflows.OperateResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	in := workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: op, Items: items}
	if err := engine.StartOperate(ctx, e.client, queue, in); err != nil {
		return workflows.OperateResult{}, err
	}
	return engine.WaitOperateAll(ctx, e.client, in.TaskID)
}

// fleetOpWait restarts one process on every tenth host while the fleet is
// supervised, and reads from those hosts' histories how long each host
// op's activity waited between its schedule and its start.
func (e *env) fleetOpWait(ctx context.Context, hosts []*testbed.Host, workers []*workerProc, r *fleetResult, expect map[fleetKey]int) error {
	var items []proc.Item
	var picked []*testbed.Host
	last := r.procs - 1
	for i := 0; i < len(hosts); i += 10 {
		spec := fleetSpec(hosts[i], last)
		picked = append(picked, hosts[i])
		expect[fleetKey{hosts[i], last}]++
		items = append(items, proc.Item{Target: proc.Target{IP: hosts[i].IP}, Process: proc.ProcessID{Namespace: fleetNS, Name: fleetName(last)}, Spec: &spec})
	}
	r.OpHosts = len(items)
	sdkSum0, sdkN0 := sdkToStart(workers)
	began := time.Now()
	res, err := e.operateOn(ctx, fleetQueue, proc.OpRestart, items)
	if err != nil {
		return err
	}
	if err := allSucceeded("restart", res); err != nil {
		return err
	}
	r.OpTook = time.Since(began)
	for _, h := range picked {
		evs, err := e.history(ctx, workflows.HostWorkflowID(proc.HostID{IP: h.IP}))
		if err != nil {
			return err
		}
		for _, w := range toStart(evs, began) {
			r.OpActivities++
			if w <= time.Second {
				r.OpWithin1s++
			}
			r.OpMaxToStart = max(r.OpMaxToStart, w.Seconds())
		}
	}
	// The SDK's own view: the ops queue's activities that started during
	// the op, and their mean wait (its summaries' quantiles span minutes
	// before, setup included).
	if sum, n := sdkToStart(workers); n > sdkN0 {
		r.OpSDKToStart, r.OpSDKCount = (sum-sdkSum0)/(n-sdkN0), int(n-sdkN0)
	}
	for _, h := range picked {
		if n := fleetStarts(h, last); n != 2 {
			return fmt.Errorf("restart op on %s: the process was started %d times, want 2", h.IP, n)
		}
	}
	logf("restart on %d hosts while supervising: %s; %d of %d host activities started within 1 s of their schedule",
		r.OpHosts, r.OpTook.Round(100*time.Millisecond), r.OpWithin1s, r.OpActivities)
	return nil
}

// fleetKey names one supervised process.
type fleetKey struct {
	host *testbed.Host
	p    int
}

// toStart is schedule-to-start of every activity a history scheduled after
// since, the long watch excepted.
func toStart(evs []*historypb.HistoryEvent, since time.Time) []time.Duration {
	scheduled := map[int64]time.Time{}
	var out []time.Duration
	for _, ev := range evs {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			if ev.GetEventTime().AsTime().After(since) && a.GetActivityType().GetName() != "Watch" {
				scheduled[ev.GetEventId()] = ev.GetEventTime().AsTime()
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if at, ok := scheduled[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; ok {
				out = append(out, ev.GetEventTime().AsTime().Sub(at))
			}
		}
	}
	return out
}

// hostHistoryLengths is each host workflow's history length, by describe.
func (e *env) hostHistoryLengths(ctx context.Context, hosts []*testbed.Host) ([]int, error) {
	out := make([]int, len(hosts))
	err := forHosts(hosts, func(h *testbed.Host) error {
		d, err := e.client.DescribeWorkflowExecution(ctx, workflows.HostWorkflowID(proc.HostID{IP: h.IP}), "")
		if err != nil {
			return err
		}
		out[h.Index] = int(d.GetWorkflowExecutionInfo().GetHistoryLength())
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out[:len(hosts)], nil
}

// sortedSecs sorts durations in seconds.
func sortedSecs(xs []float64) []float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s
}

// sdkToStart sums the workers' SDK schedule-to-start summaries of the ops
// queue's activities: seconds, and how many.
func sdkToStart(workers []*workerProc) (sum, n float64) {
	queue := `task_queue="` + strings.ReplaceAll(fleetQueue, "-", "_") + `"`
	return sumMetric(workers, "temporal_activity_schedule_to_start_latency_sum{", queue),
		sumMetric(workers, "temporal_activity_schedule_to_start_latency_count{", queue)
}
