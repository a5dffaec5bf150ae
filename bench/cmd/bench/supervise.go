package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

const (
	supProcs    = 5
	supInterval = 5 * time.Second
	supCheck    = time.Second // start_check_secs of the supervised processes
	supNS       = "sup"
)

// supResult is what supervision cost.
type supResult struct {
	Hosts, Procs           int
	Interval, Quiet        time.Duration
	HostPolls              float64
	ExecsPerPoll           float64
	EventsPerHostMinute    float64
	CPUPer1000Polls        float64
	RSSMiB, PeakRSSMiB     float64
	Killed, Restarted      int
	P50, P95, Max          float64 // kill to process_restart_success, seconds
	UnexpectedRestarts     int
	StartTook, RestartWait time.Duration
}

// superviseCost starts supProcs managed processes on each of the first
// hosts, lets them be supervised at supInterval for quiet, measures what
// that costs, then kills a tenth of them and times their restarts.
func (e *env) superviseCost(ctx context.Context, hosts int, quiet time.Duration) (*supResult, error) {
	bed := e.bed.Hosts[:hosts]
	if err := installSupervised(bed); err != nil {
		return nil, err
	}
	// A worker of its own, so its counters and memory are supervision's.
	if err := e.startWorker(); err != nil {
		return nil, err
	}
	var items []proc.Item
	for _, h := range bed {
		for p := 0; p < supProcs; p++ {
			spec := supSpec(p)
			items = append(items, proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: supNS, Name: supName(p)}, Spec: &spec})
		}
	}
	r := &supResult{Hosts: hosts, Procs: supProcs, Interval: supInterval}
	began := time.Now()
	res, err := e.operate(ctx, proc.OpStart, items)
	if err != nil {
		return nil, err
	}
	if err := allSucceeded("start", res); err != nil {
		return nil, err
	}
	r.StartTook = time.Since(began)
	log.Printf("supervision: %d processes started in %s; letting every watch begin", len(items), r.StartTook.Round(time.Second))
	if err := sleepCtx(ctx, 3*supInterval); err != nil {
		return nil, err
	}

	before, err := e.historyLengths(ctx, bed)
	if err != nil {
		return nil, err
	}
	execs0 := e.worker.SSH.Stats().Execs
	cpu0 := cpuSeconds()
	t0 := time.Now()
	log.Printf("supervision: quiet for %s", quiet)
	if err := sleepCtx(ctx, quiet); err != nil {
		return nil, err
	}
	elapsed := time.Since(t0)
	cpu := cpuSeconds() - cpu0
	execs := e.worker.SSH.Stats().Execs - execs0
	r.RSSMiB, r.PeakRSSMiB = rss()
	after, err := e.historyLengths(ctx, bed)
	if err != nil {
		return nil, err
	}
	r.Quiet = elapsed
	r.HostPolls = float64(hosts) * elapsed.Seconds() / supInterval.Seconds()
	r.ExecsPerPoll = float64(execs) / r.HostPolls
	r.CPUPer1000Polls = cpu / r.HostPolls * 1000
	grown := 0
	for i := range before {
		grown += after[i] - before[i]
	}
	r.EventsPerHostMinute = float64(grown) / float64(hosts) / elapsed.Minutes()

	// The quiet window's measures stand even if the restarts cannot be timed.
	return r, e.killAndTime(ctx, bed, r)
}

func supName(p int) string { return "svc" + strconv.Itoa(p) }

func supSpec(p int) proc.Spec {
	dir := "/data/" + supNS + strconv.Itoa(p)
	return proc.Spec{
		ProcName: "svc", SetupPath: dir, PidPath: dir + "/svc.pid",
		StartCmd: "setsid ./svc 86400 </dev/null >/dev/null 2>&1 & echo $! > svc.pid",
		AutoType: proc.AutoResident, StartCheck: supCheck, OpTimeout: 20 * time.Second,
	}
}

// installSupervised puts the program svc (a copy of sleep) in each
// process's directory on every host.
func installSupervised(hosts []*testbed.Host) error {
	var script strings.Builder
	script.WriteString("set -e\n")
	for p := 0; p < supProcs; p++ {
		dir := supSpec(p).SetupPath
		fmt.Fprintf(&script, "mkdir -p %s && cp \"$(command -v sleep)\" %s/svc\n", dir, dir)
	}
	return forHosts(hosts, func(h *testbed.Host) error {
		_, err := h.Exec(script.String())
		return err
	})
}

// forHosts runs f on every host, 16 at a time, and returns the first error.
func forHosts(hosts []*testbed.Host, f func(h *testbed.Host) error) error {
	for _, err := range eachHost(hosts, func(_ int, h *testbed.Host) error { return f(h) }) {
		if err != nil {
			return err
		}
	}
	return nil
}

// eachHost runs f on every host (i its place in hosts), 16 at a time, and
// returns each host's error.
func eachHost(hosts []*testbed.Host, f func(i int, h *testbed.Host) error) []error {
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, h := range hosts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = f(i, h)
		}()
	}
	wg.Wait()
	return errs
}

// killAndTime SIGKILLs every tenth supervised process and measures, from
// each host's supervision events, how long each took to be started again.
func (e *env) killAndTime(ctx context.Context, hosts []*testbed.Host, r *supResult) error {
	type victim struct {
		host *testbed.Host
		name string
		at   time.Time
	}
	var victims []*victim
	for i := 0; i < len(hosts)*supProcs; i += 10 {
		victims = append(victims, &victim{host: hosts[i/supProcs], name: supName(i % supProcs)})
	}
	var mu sync.Mutex
	err := forHosts(hosts, func(h *testbed.Host) error {
		for _, v := range victims {
			if v.host != h {
				continue
			}
			p, _ := strconv.Atoi(strings.TrimPrefix(v.name, "svc"))
			at := time.Now()
			if _, err := h.Exec(fmt.Sprintf("kill -9 $(cat %s)", supSpec(p).PidPath)); err != nil {
				return err
			}
			mu.Lock()
			v.at = at
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.Killed = len(victims)
	log.Printf("supervision: killed %d processes; waiting for their restarts", len(victims))
	began := time.Now()
	latency := map[*victim]float64{}
	deadline := time.Now().Add(3 * time.Minute)
	for len(latency) < len(victims) && time.Now().Before(deadline) {
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
		seen := map[*testbed.Host][]workflows.Event{}
		for _, v := range victims {
			if _, done := latency[v]; done {
				continue
			}
			evs, ok := seen[v.host]
			if !ok {
				// A host workflow busy restarting may not answer in time;
				// it is asked again on the next pass.
				if _, err := engine.QueryOpen(ctx, e.client, workflows.HostWorkflowID(proc.HostID{IP: v.host.IP}), workflows.EventsQuery, &evs); err != nil {
					log.Printf("supervision: events of %s: %v; asking again", v.host.IP, err)
					continue
				}
				seen[v.host] = evs
			}
			for _, ev := range evs {
				if ev.Process.Name == v.name && ev.Kind == workflows.EventRestartSuccess && ev.Time.After(v.at) {
					latency[v] = ev.Time.Sub(v.at).Seconds()
					break
				}
			}
		}
	}
	r.RestartWait = time.Since(began)
	var xs []float64
	for _, l := range latency {
		xs = append(xs, l)
	}
	sort.Float64s(xs)
	r.Restarted = len(xs)
	if len(xs) > 0 {
		r.P50, r.P95, r.Max = percentile(xs, 50), percentile(xs, 95), xs[len(xs)-1]
	}
	// Restarts of processes nobody killed would mean supervision misjudged.
	victimSet := map[string]bool{}
	for _, v := range victims {
		victimSet[v.host.IP+"/"+v.name] = true
	}
	for _, h := range hosts {
		var evs []workflows.Event
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			if _, err = engine.QueryOpen(ctx, e.client, workflows.HostWorkflowID(proc.HostID{IP: h.IP}), workflows.EventsQuery, &evs); err == nil {
				break
			}
		}
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Process.Namespace == supNS && ev.Kind == workflows.EventRestartSuccess && !victimSet[h.IP+"/"+ev.Process.Name] {
				r.UnexpectedRestarts++
			}
		}
	}
	return nil
}

// percentile of sorted xs, nearest rank.
func percentile(xs []float64, p float64) float64 {
	i := int(float64(len(xs))*p/100+0.5) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func (e *env) historyLengths(ctx context.Context, hosts []*testbed.Host) ([]int, error) {
	out := make([]int, len(hosts))
	for i, h := range hosts {
		it := e.client.GetWorkflowHistory(ctx, workflows.HostWorkflowID(proc.HostID{IP: h.IP}), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			if _, err := it.Next(); err != nil {
				return nil, err
			}
			out[i]++
		}
	}
	return out, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cpuSeconds is this process's user+system CPU time: the worker's, as
// nothing else here works while supervision runs.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// rss is this process's resident and peak resident memory, in MiB.
func rss() (cur, peak float64) {
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			cur = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return cur, peak
}
