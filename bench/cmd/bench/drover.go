package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/drover-sh/drover/workflows"
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
	began := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(e.s.bin, "starter"), "api", "operate_process", "-f", body, "--wait",
		"--temporal-address", e.cfg.TemporalAddress, "--task-queue", e.cfg.TaskQueue, "--inventory", e.cfg.Inventory)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	runErr := cmd.Run()
	took := time.Since(began)
	var resp struct {
		Data map[string]struct {
			ErrorCode int    `json:"error_code"`
			ErrorMsg  string `json:"error_msg"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
		return droverRun{}, fmt.Errorf("starter: %v: output: %v: %s", runErr, err, errOut.String())
	}
	okCount := 0
	failures := map[string]int{}
	for _, r := range resp.Data {
		if r.ErrorCode == 0 {
			okCount++
		} else {
			failures[fmt.Sprintf("%d %s", r.ErrorCode, r.ErrorMsg)]++
		}
	}
	if okCount != size || runErr != nil {
		return droverRun{}, fmt.Errorf("drover: %d of %d hosts answered running (%v); the others: %v", okCount, size, runErr, failures)
	}
	after := e.worker.SSH.Stats()
	r := droverRun{Total: took.Seconds(), Handshakes: after.Handshakes - before.Handshakes, Execs: after.Execs - before.Execs}
	if err := e.breakdown(ctx, began, took, &r); err != nil {
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
	var hosts []map[string]any
	for _, h := range e.bed.Hosts[:size] {
		hosts = append(hosts, map[string]any{"ip": h.IP, "bk_cloud_id": 0, "bk_supplier_id": 0})
	}
	return path, writeJSON(path, map[string]any{
		"bk_app_code": "bench", "bk_username": "bench",
		"meta":    map[string]any{"namespace": probeNS, "name": probeName, "labels": map[string]string{"proc_name": probeName}},
		"op_type": 2,
		"hosts":   hosts,
	})
}

// breakdown finds the task the starter ran and splits its time.
func (e *env) breakdown(ctx context.Context, began time.Time, took time.Duration, r *droverRun) error {
	q := fmt.Sprintf("WorkflowType = '%s' AND StartTime >= '%s'", workflows.OperateWorkflowName, began.Add(-time.Second).UTC().Format(time.RFC3339Nano))
	resp, err := e.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q})
	if err != nil {
		return fmt.Errorf("find the task: %w", err)
	}
	var id string
	var latest time.Time
	for _, ex := range resp.Executions {
		if t := ex.GetStartTime().AsTime(); t.After(latest) {
			latest, id = t, ex.Execution.WorkflowId
		}
	}
	if id == "" {
		return fmt.Errorf("the task started at %s is not listed", began.Format(time.RFC3339))
	}
	it := e.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var start, end, firstAct time.Time
	started := map[int64]time.Time{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err
		}
		r.Events++
		t := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			start = t
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			end = t
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			r.Batches++
			started[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = t
			if firstAct.IsZero() || t.Before(firstAct) {
				firstAct = t
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := ev.GetActivityTaskCompletedEventAttributes()
			if s, ok := started[a.GetScheduledEventId()]; ok {
				r.Activity = max(r.Activity, t.Sub(s).Seconds())
			}
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
