package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/proc"
)

// droverRun is where one drover status op spent its time, from the
// starter's wall clock and the task's history.
type droverRun struct {
	Warm bool
	// Total is the starter's wall time; ToStart from exec to the task's
	// start, Workflow the task's own run, Fetch from its close to the
	// starter's exit.
	Total, ToStart, Workflow, Fetch float64
	// FirstActivity is from the task's start to its first status batch
	// starting; Activity the longest batch.
	FirstActivity, Activity float64
	Events, Batches         int
	Handshakes, Execs       int64 // SSH, during this op
}

// droverPair runs one cold op on a new worker, then one warm op on it.
func (e *env) droverPair(ctx context.Context, size int, record bool) (cold, warm float64, err error) {
	if err := e.startWorker(); err != nil {
		return 0, 0, err
	}
	// The first pair at the main size is profiled: the worker runs in this
	// process, and nothing else here works while the starter waits.
	profile := record && len(e.droverRuns) == 0
	if profile {
		stop, err := startProfile(filepath.Join(e.s.out, "drover-cpu.pprof"))
		if err != nil {
			return 0, 0, err
		}
		defer stop()
	}
	for i, dst := range []*float64{&cold, &warm} {
		r, err := e.droverOnce(ctx, size)
		if err != nil {
			return 0, 0, err
		}
		r.Warm = i == 1
		*dst = r.Total
		if record {
			e.droverRuns = append(e.droverRuns, r)
		}
	}
	return cold, warm, nil
}

// droverOnce runs `starter api operate_process --wait` with op_type 2 on
// the first size hosts and checks every host answered running.
func (e *env) droverOnce(ctx context.Context, size int) (droverRun, error) {
	body, err := e.statusRequest(size)
	if err != nil {
		return droverRun{}, err
	}
	before := e.worker.SSH.Stats()
	a, err := e.starterAPI(ctx, gseapi.APIOperateProcess, body, e.cfg.TaskQueue, e.cfg.Inventory)
	if err != nil {
		return droverRun{}, err
	}
	if a.Codes[proc.CodeSuccess] != size || a.Exit != nil {
		return droverRun{}, fmt.Errorf("drover: %d of %d hosts answered running (%v); the others: %s", a.Codes[proc.CodeSuccess], size, a.Exit, codeSummary(a.Codes, a.Example))
	}
	after := e.worker.SSH.Stats()
	r := droverRun{Total: a.Took.Seconds(), Handshakes: after.Handshakes - before.Handshakes, Execs: after.Execs - before.Execs}
	if err := e.breakdown(ctx, a.Began, a.Took, &r); err != nil {
		return droverRun{}, err
	}
	return r, nil
}

// statusRequest writes the GSE operate_process status body for the first
// size hosts, once.
func (e *env) statusRequest(size int) (string, error) {
	path := filepath.Join(e.dir, fmt.Sprintf("status-%d.json", size))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	return path, operateBody(path, probeNS, probeName, proc.OpStatus, ips(e.bed.Hosts[:size]))
}

// breakdown finds the task the starter ran and splits its time.
func (e *env) breakdown(ctx context.Context, began time.Time, took time.Duration, r *droverRun) error {
	_, tr, err := e.latestRun(ctx, began)
	if err != nil {
		return err
	}
	start, end := tr.start, tr.end
	var firstAct time.Time
	r.Events = tr.events
	for _, a := range tr.acts {
		if a.started.IsZero() {
			continue
		}
		r.Batches++
		if firstAct.IsZero() || a.started.Before(firstAct) {
			firstAct = a.started
		}
		if !a.completed.IsZero() {
			r.Activity = max(r.Activity, a.completed.Sub(a.started).Seconds())
		}
	}
	r.ToStart = start.Sub(began).Seconds()
	r.Workflow = end.Sub(start).Seconds()
	r.Fetch = began.Add(took).Sub(end).Seconds()
	r.FirstActivity = firstAct.Sub(start).Seconds()
	return nil
}

// droverStats are the phase medians of drover's runs at the main size.
type droverStats struct {
	Cold, Warm droverRun
}

func (e *env) droverStats() droverStats {
	var st droverStats
	for _, warm := range []bool{false, true} {
		var runs []droverRun
		for _, r := range e.droverRuns {
			if r.Warm == warm {
				runs = append(runs, r)
			}
		}
		if len(runs) == 0 {
			continue
		}
		pick := func(f func(droverRun) float64) float64 {
			var xs []float64
			for _, r := range runs {
				xs = append(xs, f(r))
			}
			return median(xs)
		}
		m := droverRun{
			Warm:          warm,
			Total:         pick(func(r droverRun) float64 { return r.Total }),
			ToStart:       pick(func(r droverRun) float64 { return r.ToStart }),
			Workflow:      pick(func(r droverRun) float64 { return r.Workflow }),
			Fetch:         pick(func(r droverRun) float64 { return r.Fetch }),
			FirstActivity: pick(func(r droverRun) float64 { return r.FirstActivity }),
			Activity:      pick(func(r droverRun) float64 { return r.Activity }),
			Events:        runs[0].Events, Batches: runs[0].Batches,
			Handshakes: runs[0].Handshakes, Execs: runs[0].Execs,
		}
		if warm {
			st.Warm = m
		} else {
			st.Cold = m
		}
	}
	return st
}

// startProfile writes this process's CPU profile to path until stop.
func startProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
