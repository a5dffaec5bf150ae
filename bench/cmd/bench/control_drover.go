package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// droverCtlRun is where one drover control op spent its time, from the
// starter's wall clock, the task's history and its hosts' histories.
type droverCtlRun struct {
	Op   string
	Warm bool
	// Total is the starter's wall time; ToStart from exec to the task's
	// start; Dispatched from the task's start to its Dispatch activity's
	// completion; Closed from the last reply the task received to its
	// close; Fetch from its close to the starter's exit.
	Total, ToStart, Dispatched, Closed, Fetch float64
	// Per host, the p50 and max of: the task's start to the host's op
	// signal (Signalled), that signal to the HostOp activity's schedule
	// (ToSchedule), schedule to start (ToStartAct), the activity on the
	// host (HostOp: SSH and check sleeps), its end to the reply signal
	// (ToReply).
	Signalled, ToSchedule, ToStartAct, HostOp, ToReply [2]float64
	// HostTasks is the workflow tasks a host workflow ran for the op (p50);
	// TaskTasks the task's own.
	HostTasks, TaskTasks int
	Handshakes, Execs    int64
	// Requests is the dev server's frontend requests in drover's
	// namespace during the op, by operation, when its metrics are served.
	Requests map[string]float64
}

// droverControl runs `starter api operate_process --wait` with op on hosts
// and checks that every host answered 0.
func (e *env) droverControl(ctx context.Context, name string, op proc.OpType, hosts []*testbed.Host) (droverCtlRun, error) {
	body := filepath.Join(e.dir, fmt.Sprintf("%s-%d.json", name, len(hosts)))
	var list []map[string]any
	for _, h := range hosts {
		list = append(list, map[string]any{"ip": h.IP, "bk_cloud_id": 0, "bk_supplier_id": 0})
	}
	if err := writeJSON(body, map[string]any{
		"bk_app_code": "bench", "bk_username": "bench",
		"meta":    map[string]any{"namespace": ctlNS, "name": ctlName, "labels": map[string]string{"proc_name": ctlName}},
		"op_type": int(op), "hosts": list,
	}); err != nil {
		return droverCtlRun{}, err
	}
	// The server reports its counters every second or so: let the last
	// op's history reads land before counting this one's requests.
	time.Sleep(2 * time.Second)
	before := e.worker.SSH.Stats()
	reqBefore, _ := e.serverRequests()
	began := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(e.s.bin, "starter"), "api", "operate_process", "-f", body, "--wait",
		"--temporal-address", e.cfg.TemporalAddress, "--task-queue", e.cfg.TaskQueue, "--inventory", e.cfg.Inventory)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	runErr := cmd.Run()
	took := time.Since(began)
	reqAfter, _ := e.serverRequests()
	r := droverCtlRun{Op: name, Total: took.Seconds(), Requests: diffRequests(reqBefore, reqAfter)}
	after := e.worker.SSH.Stats()
	r.Handshakes, r.Execs = after.Handshakes-before.Handshakes, after.Execs-before.Execs
	var resp struct {
		Data map[string]struct {
			ErrorCode int    `json:"error_code"`
			ErrorMsg  string `json:"error_msg"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
		return r, fmt.Errorf("starter: %v: output: %v: %s", runErr, err, errOut.String())
	}
	failures := map[string]int{}
	okCount := 0
	for _, res := range resp.Data {
		if res.ErrorCode == 0 {
			okCount++
		} else {
			failures[fmt.Sprintf("%d %s", res.ErrorCode, res.ErrorMsg)]++
		}
	}
	if okCount != len(hosts) || runErr != nil {
		return r, fmt.Errorf("drover %s: %d of %d hosts answered 0 (%v); the others: %v", name, okCount, len(hosts), runErr, failures)
	}
	return r, e.ctlBreakdown(ctx, began, took, hosts, &r)
}

// ctlBreakdown splits a control op's time by the task's history and its
// hosts' histories.
func (e *env) ctlBreakdown(ctx context.Context, began time.Time, took time.Duration, hosts []*testbed.Host, r *droverCtlRun) error {
	id, err := e.latestTask(ctx, began)
	if err != nil {
		return err
	}
	evs, err := e.history(ctx, id)
	if err != nil {
		return err
	}
	var start, end, dispatched, lastReply time.Time
	for _, ev := range evs {
		t := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			start = t
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			end = t
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if dispatched.IsZero() {
				dispatched = t
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			lastReply = t
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			r.TaskTasks++
		}
	}
	r.ToStart = start.Sub(began).Seconds()
	r.Dispatched = dispatched.Sub(start).Seconds()
	if !lastReply.IsZero() {
		r.Closed = end.Sub(lastReply).Seconds()
	}
	r.Fetch = began.Add(took).Sub(end).Seconds()

	// Each host's history from the task's start: the op signal, the
	// HostOp activity, the reply.
	type hostPhases struct {
		signalled, toSchedule, toStart, run, toReply float64
		tasks                                        int
	}
	phases := make([]hostPhases, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, h := range hosts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			evs, err := e.history(ctx, workflows.HostWorkflowID(proc.HostID{IP: h.IP}))
			if err != nil {
				errs[i] = err
				return
			}
			var sig, sched, started, done, reply time.Time
			for _, ev := range evs {
				t := ev.GetEventTime().AsTime()
				if t.Before(start) {
					continue
				}
				switch ev.GetEventType() {
				case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
					if sig.IsZero() && ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == workflows.OpSignal {
						sig = t
					}
				case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
					if !sig.IsZero() && sched.IsZero() && ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "HostOp" {
						sched = t
					}
				case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
					if !sched.IsZero() && started.IsZero() {
						started = t
					}
				case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
					if !started.IsZero() && done.IsZero() {
						done = t
					}
				case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
					if !done.IsZero() && reply.IsZero() {
						reply = t
					}
				case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
					if !sig.IsZero() && (reply.IsZero() || !t.After(end)) {
						phases[i].tasks++
					}
				}
			}
			if sig.IsZero() || reply.IsZero() {
				errs[i] = fmt.Errorf("host %s: no op signal and reply in its history after %s", h.IP, start.Format(time.RFC3339Nano))
				return
			}
			phases[i] = hostPhases{signalled: sig.Sub(start).Seconds(), toSchedule: sched.Sub(sig).Seconds(),
				toStart: started.Sub(sched).Seconds(), run: done.Sub(started).Seconds(), toReply: reply.Sub(done).Seconds(),
				tasks: phases[i].tasks}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	pick := func(f func(hostPhases) float64) [2]float64 {
		xs := make([]float64, len(phases))
		for i, p := range phases {
			xs[i] = f(p)
		}
		sort.Float64s(xs)
		return [2]float64{median(xs), xs[len(xs)-1]}
	}
	r.Signalled = pick(func(p hostPhases) float64 { return p.signalled })
	r.ToSchedule = pick(func(p hostPhases) float64 { return p.toSchedule })
	r.ToStartAct = pick(func(p hostPhases) float64 { return p.toStart })
	r.HostOp = pick(func(p hostPhases) float64 { return p.run })
	r.ToReply = pick(func(p hostPhases) float64 { return p.toReply })
	r.HostTasks = int(pick(func(p hostPhases) float64 { return float64(p.tasks) })[0])
	return nil
}

// latestTask is the id of the newest Operate workflow started since began.
func (e *env) latestTask(ctx context.Context, began time.Time) (string, error) {
	q := fmt.Sprintf("WorkflowType = '%s' AND StartTime >= '%s'", workflows.OperateWorkflowName, began.Add(-time.Second).UTC().Format(time.RFC3339Nano))
	resp, err := e.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q})
	if err != nil {
		return "", fmt.Errorf("find the task: %w", err)
	}
	var id string
	var latest time.Time
	for _, ex := range resp.Executions {
		if t := ex.GetStartTime().AsTime(); t.After(latest) {
			latest, id = t, ex.Execution.WorkflowId
		}
	}
	if id == "" {
		return "", fmt.Errorf("the task started at %s is not listed", began.Format(time.RFC3339))
	}
	return id, nil
}

func (e *env) history(ctx context.Context, id string) ([]*historypb.HistoryEvent, error) {
	it := e.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

func diffRequests(before, after map[string]float64) map[string]float64 {
	if after == nil {
		return nil
	}
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// serverRequests reads the dev server's frontend requests by operation
// (service_requests): those in drover's namespace, and apart from them the
// server's own (its system namespace's housekeeping workers), which no
// client of it sends. Its history and matching services count each request
// again as they pass it on; they are not requests to the server. It is nil
// when the server's metrics are not served.
func (e *env) serverRequests() (ours, own map[string]float64) {
	if e.metricsPort == 0 {
		return nil, nil
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", e.metricsPort))
	if err != nil {
		return nil, nil
	}
	defer resp.Body.Close()
	ours, own = map[string]float64{}, map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "service_requests{") || label(line, "service_name") != "frontend" {
			continue
		}
		op := label(line, "operation")
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if op == "" || err != nil {
			continue
		}
		if label(line, "namespace") == e.cfg.TemporalNamespace {
			ours[op] += v
		} else {
			own[op] += v
		}
	}
	return ours, own
}

// label is a Prometheus line's value of one label, or "".
func label(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}
