package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// The fleet-size ops part: register, start, status, restart and stop over
// many inventory identities that share a few sshd hosts through `address`,
// at a baseline size and at fleet size, on a worker of their own.
const (
	fleetOpsNS    = "fan"
	fleetOpsName  = "svc"
	fleetOpsQueue = "bench-fleetops"
	fleetOpsDir   = "/data/" + fleetOpsNS
)

// fleetOpsOps are the ops timed at each size, in order.
var fleetOpsOps = []string{"register", "start", "status", "restart", "stop"}

// fleetOpsSettings: identity counts (the first is the baseline ratios are
// taken against) and the sshd hosts they share.
type fleetOpsSettings struct {
	sizes []int
	sshd  int
	// simulated: the identities are simulated hosts (inventory transport
	// simulated), answered in-process by the worker, instead of
	// identities of the bed's sshd hosts: drover's and the engine's cost
	// without sshd's.
	simulated bool
	// sessions is the worker's max_sessions_per_host for the shared
	// sshd hosts: each stands for hundreds of identities, which would
	// each have a connection of their own.
	sessions int
}

// fleetOpsRun is one op at one size.
type fleetOpsRun struct {
	// Took is the caller's wall time: the starter's, from exec to exit.
	Took time.Duration
	// TaskDone is, for a register whose answer left keys pending
	// (register_proc_info answers within gseapi.SyncTimeout), the time
	// until its task ended.
	TaskDone time.Duration
	// Codes counts the keys of the op's answer by code; Example is one
	// message of each code but success.
	Codes   map[proc.Code]int
	Example map[proc.Code]string
	// Keys is the keys get_proc_operate_result answered.
	Keys  int
	Ticks int
	// The task's history and its first chunk's, in events and bytes.
	TaskEvents, TaskBytes, ChunkEvents, ChunkBytes int
	// RunAgain counts the batch activities (deliveries, status probes)
	// of the task and its chunks that started more than once: an attempt
	// given up, by a lost heartbeat or a timeout, and tried again.
	RunAgain int
	// Execs is the SSH execs the worker made during the op.
	Execs int64
	// Engine is the dev server's work during the op.
	Engine engineUse
	// CPU is what the machine spent while the starter ran, by process.
	CPU cpuSplit
	Err string
}

// ok reports whether every one of n keys answered success.
func (r *fleetOpsRun) ok(n int) bool {
	return r != nil && r.Err == "" && r.Codes[proc.CodeSuccess] == n
}

// fleetOpsResult is every op at every size.
type fleetOpsResult struct {
	fleetOpsSettings
	Runs map[int]map[string]*fleetOpsRun
	// Floor is, by size, each control op's time with no engine
	// (fleetOpsFloor); FloorErr why a size's floor stopped.
	Floor    map[int]map[string]floorRun
	FloorErr map[int]string
}

// fleetOps runs the part. A failed op is recorded and the next still runs:
// the table shows what held and what did not.
func (e *env) fleetOps(ctx context.Context, f fleetOpsSettings) (*fleetOpsResult, error) {
	r := &fleetOpsResult{fleetOpsSettings: f, Runs: map[int]map[string]*fleetOpsRun{},
		Floor: map[int]map[string]floorRun{}, FloorErr: map[int]string{}}
	if f.sshd > len(e.bed.Hosts) {
		return r, fmt.Errorf("BENCH_FLEETOPS_SSHD %d: the bed has %d hosts", f.sshd, len(e.bed.Hosts))
	}
	shared := e.bed.Hosts[:f.sshd]
	if f.simulated {
		shared = nil
	}
	if err := forHosts(shared, func(h *testbed.Host) error {
		_, err := h.Exec(`mkdir -p ` + fleetOpsDir + ` && cp "$(command -v sleep)" ` + fleetOpsDir + `/svc && rm -f ` + fleetOpsDir + `/*.pid`)
		return err
	}); err != nil {
		return r, err
	}
	inv, items, err := e.fleetOpsInventory(f)
	if err != nil {
		return r, err
	}
	cfg := e.cfg
	cfg.Inventory, cfg.TaskQueue = inv, fleetOpsQueue
	// A start puts its process under supervision; thousands of watches
	// would measure supervision (make bench-fleet does), not the ops.
	cfg.NoSupervision = true
	if !f.simulated {
		cfg.MaxSessionsPerHost = f.sessions
	}
	cfg.MetricsListen = "127.0.0.1:0"
	// The worker's warnings (the SDK's among them: heartbeats and
	// completions a loaded server did not take) go to a file beside the
	// results (BENCH_OUT; the testbed's directory when the results go to
	// the repository), to say why a batch ran again.
	logDir := e.s.out
	if logDir == defaultOut() {
		logDir = e.dir
	}
	e.logDir = logDir
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return r, err
	}
	logFile, err := os.Create(filepath.Join(logDir, "fleetops-worker.log"))
	if err != nil {
		return r, err
	}
	defer logFile.Close()
	w, err := cli.StartWorker(cfg, slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return r, err
	}
	defer w.Stop()
	log.Printf("fleet-size ops: the worker's warnings in %s", logFile.Name())
	log.Printf("fleet-size ops: the worker's metrics at http://%s/metrics", w.MetricsAddr)
	for _, n := range f.sizes {
		runs := map[string]*fleetOpsRun{}
		r.Runs[n] = runs
		for _, op := range fleetOpsOps {
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			var run *fleetOpsRun
			before := w.SSH.Stats().Execs
			if op == "register" {
				run = e.fleetOpsRegister(ctx, cfg.Inventory, items[n])
			} else {
				run = e.fleetOpsStarter(ctx, cfg.Inventory, op, n)
			}
			run.Execs = w.SSH.Stats().Execs - before
			runs[op] = run
			log.Printf("fleet-size ops: %s on %d identities: %s, codes %s, %d keys read back, %.2f execs per identity, CPU s server %.1f, worker %.1f, hosts' sshd %.1f, rest %.1f %s", op, n,
				run.Took.Round(100*time.Millisecond), codeSummary(run.Codes, nil), run.Keys, float64(run.Execs)/float64(n),
				run.CPU.Server, run.CPU.Worker, run.CPU.Hosts, run.CPU.Rest-run.CPU.Hosts, run.Err)
			if op == "register" {
				// One register_proc_info body has one spec, so identities
				// sharing an sshd host share its pid file; each is given
				// its own before the control ops (not timed).
				res, err := e.operateOn(ctx, fleetOpsQueue, proc.OpSpecUpdate, items[n])
				if err == nil {
					err = allSucceeded("update_proc_info, a pid file per identity", res)
				}
				if err != nil {
					return r, err
				}
			}
		}
		if !f.simulated && ctx.Err() == nil {
			// The floor's start needs every process stopped: drover's stop
			// left them so, and an ops list that ends before stop has them
			// stopped here, untimed.
			if err := e.stopForFloor(ctx, items[n]); err != nil {
				r.FloorErr[n] = err.Error()
				continue
			}
			took, err := e.fleetOpsFloor(ctx, cfg.Inventory, items[n], f.sessions)
			r.Floor[n] = took
			if err != nil {
				r.FloorErr[n] = err.Error()
			}
			for _, op := range fleetOpsFloorOps {
				if t, ok := took[op]; ok {
					log.Printf("fleet-size ops: the floor's %s on %d identities: %.1fs, CPU s server %.1f, floor %.1f, hosts' sshd %.1f, rest %.1f", op, n, t.Took.Seconds(), t.CPU.Server, t.CPU.Worker, t.CPU.Hosts, t.CPU.Rest-t.CPU.Hosts)
				}
			}
			if err != nil {
				log.Printf("fleet-size ops: the floor on %d identities stopped: %v", n, err)
			}
		}
	}
	return r, nil
}

// leavesRunning tells whether ops (a prefix of the fleet-size ops) start
// the processes and do not stop them.
func leavesRunning(ops []string) bool {
	return slices.Contains(ops, "start") && ops[len(ops)-1] != "stop"
}

// stopForFloor stops the identities' processes when the ops list left
// them running.
func (e *env) stopForFloor(ctx context.Context, items []proc.Item) error {
	if !leavesRunning(fleetOpsOps) {
		return nil
	}
	res, err := e.operateOn(ctx, fleetOpsQueue, proc.OpStop, items)
	if err == nil {
		err = allSucceeded("stop before the floor", res)
	}
	return err
}

// fleetOpsGroup is the inventory group of the identities of one size.
func fleetOpsGroup(n int) string { return fmt.Sprintf("fleetops-%d", n) }

// fleetOpsInventory writes an inventory holding the bed's hosts and, for
// each size, that many identities spread over the shared sshd hosts, each
// with its own pid file; it returns the register items by size.
func (e *env) fleetOpsInventory(f fleetOpsSettings) (string, map[int][]proc.Item, error) {
	var doc map[string]any
	raw, err := os.ReadFile(e.bed.InventoryPath)
	if err != nil {
		return "", nil, err
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return "", nil, fmt.Errorf("%s: %w", e.bed.InventoryPath, err)
	}
	hosts, _ := doc["hosts"].([]any)
	items := map[int][]proc.Item{}
	for k, n := range f.sizes {
		for i := 0; i < n; i++ {
			// 10.(100+k).x.y: outside the bed's own addresses, one range per size.
			ip := fmt.Sprintf("10.%d.%d.%d", 100+k, i/250, i%250+1)
			host := map[string]any{"ip": ip, "bk_cloud_id": 0, "bk_supplier_id": 0, "groups": []string{fleetOpsGroup(n)}}
			if f.simulated {
				host["transport"] = "simulated"
			} else {
				host["address"] = e.bed.Hosts[i%f.sshd].IP
			}
			hosts = append(hosts, host)
			sp := fleetOpsSpec(ip + ".pid")
			items[n] = append(items[n], proc.Item{
				Target:  proc.Target{IP: ip},
				Process: proc.ProcessID{Namespace: fleetOpsNS, Name: fleetOpsName},
				Spec:    &sp,
			})
		}
	}
	doc["hosts"] = hosts
	out, err := yaml.Marshal(doc)
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(e.dir, "fleetops-inventory.yaml")
	return path, items, os.WriteFile(path, out, 0o644)
}

// fleetOpsSpec is the process's spec with pid file pid in its setup path.
func fleetOpsSpec(pid string) proc.Spec {
	return proc.Spec{ProcName: fleetOpsName, SetupPath: fleetOpsDir, PidPath: fleetOpsDir + "/" + pid,
		StartCmd:   "setsid ./svc 86400 </dev/null >/dev/null 2>&1 & echo $! > " + pid,
		StopCmd:    "kill $(cat " + pid + ") && rm -f " + pid,
		StartCheck: time.Second, StopCheck: time.Second}
}

// fleetOpsRegister registers the process on every identity of items with
// `starter api register_proc_info -f BODY --wait`, one body for all: the
// seed's shape, one spec for every host.
func (e *env) fleetOpsRegister(ctx context.Context, inventory string, items []proc.Item) *fleetOpsRun {
	run := &fleetOpsRun{}
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	ips := make([]string, len(items))
	for i, it := range items {
		ips[i] = it.Target.IP
	}
	body := filepath.Join(e.dir, fmt.Sprintf("fleetops-register-%d.json", len(items)))
	if err := registerBody(body, fleetOpsNS, fleetOpsName, fleetOpsSpec(fleetOpsName+".pid"), ips); err != nil {
		run.Err = err.Error()
		return run
	}
	time.Sleep(metricsLag)
	snap := e.serverSnapshot()
	a, err := e.starterAPI(ctx, gseapi.APIRegisterProcInfo, body, fleetOpsQueue, inventory)
	run.Took, run.Codes, run.Example = a.Took, a.Codes, a.Example
	if err != nil {
		run.Err = err.Error()
		return run
	}
	id, err := e.latestTask(ctx, a.Began)
	if err != nil {
		run.Err = err.Error()
		return run
	}
	if a.Codes[proc.CodeRunning] > 0 {
		if _, err := engine.WaitOperateAll(ctx, e.client, id); err != nil {
			run.Err = fmt.Sprintf("wait for the task: %v", err)
			return run
		}
		run.TaskDone = time.Since(a.Began)
	}
	time.Sleep(metricsLag)
	run.Engine = usedBetween(snap, e.serverSnapshot(), e.cfg.TemporalNamespace)
	e.fleetOpsReadBack(ctx, id, len(items), run)
	return run
}

var taskIDPattern = regexp.MustCompile(`GSETASK:\d+:\d+`)

// fleetOpsStarter runs `starter OP --wait -o json` over the group of n
// identities, as an operator would, then reads the task's results back
// through get_proc_operate_result.
func (e *env) fleetOpsStarter(ctx context.Context, inventory, op string, n int) *fleetOpsRun {
	run := &fleetOpsRun{Codes: map[proc.Code]int{}, Example: map[proc.Code]string{}}
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(e.s.bin, "starter"), op, "--namespace", fleetOpsNS, "--name", fleetOpsName,
		"--hosts", "group:"+fleetOpsGroup(n), "--wait", "-o", "json",
		"--temporal-address", e.cfg.TemporalAddress, "--task-queue", fleetOpsQueue, "--inventory", inventory)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	time.Sleep(metricsLag)
	snap := e.serverSnapshot()
	cpu := markCPU(e.serverPid, e.bedHosts())
	began := time.Now()
	runErr := cmd.Run()
	run.Took = time.Since(began)
	run.CPU = cpu.since(e.serverPid, e.bedHosts())
	time.Sleep(metricsLag)
	run.Engine = usedBetween(snap, e.serverSnapshot(), e.cfg.TemporalNamespace)
	var rows []struct {
		Key     string    `json:"key"`
		Code    proc.Code `json:"error_code"`
		Message string    `json:"error_msg"`
	}
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		run.Err = fmt.Sprintf("starter: %v: %v: %s", runErr, err, tailOf(errOut.String(), 300))
		return run
	}
	for _, r := range rows {
		run.Codes[r.Code]++
		if r.Code != proc.CodeSuccess {
			run.Example[r.Code] = r.Key + ": " + r.Message
		}
	}
	// --wait draws its progress from counts; its last tick names the task.
	ticks := strings.Split(strings.TrimSpace(errOut.String()), "\r")
	run.Ticks = len(ticks)
	id := taskIDPattern.FindString(ticks[len(ticks)-1])
	if id == "" {
		run.Err = "no task id in the progress: " + tailOf(errOut.String(), 300)
		return run
	}
	e.fleetOpsReadBack(ctx, id, n, run)
	return run
}

// fleetOpsReadBack reads task id's results back through
// get_proc_operate_result, as a caller would, and measures its histories.
func (e *env) fleetOpsReadBack(ctx context.Context, id string, n int, run *fleetOpsRun) {
	eng := &engine.Engine{Client: e.client, TaskQueue: fleetOpsQueue}
	resp, _ := gseapi.Call(ctx, eng, gseapi.APIGetProcOperateResult, []byte(`{"task_id":"`+id+`"}`), false)
	b, err := json.Marshal(resp)
	var read struct {
		Data map[string]json.RawMessage `json:"data"`
	}
	if err == nil {
		err = json.Unmarshal(b, &read)
	}
	if err != nil {
		run.Err = fmt.Sprintf("get_proc_operate_result: %v", err)
		return
	}
	run.Keys = len(read.Data)
	e.fleetOpsHistories(ctx, id, n, run)
}

// fleetOpsHistories measures a task's history and its first chunk's, and
// counts the batches the task and its chunks ran again.
func (e *env) fleetOpsHistories(ctx context.Context, id string, n int, run *fleetOpsRun) {
	why := map[string]int{}
	var task histSpan
	run.TaskEvents, run.TaskBytes, run.RunAgain, task = e.historySize(ctx, id, why)
	var closes []string
	var lastChunk time.Time
	for k := 0; n > policies.ChunkSize && k*policies.ChunkSize < n; k++ {
		events, size, again, chunk := e.historySize(ctx, workflows.SplitChunkID(id, k), why)
		if k == 0 {
			run.ChunkEvents, run.ChunkBytes = events, size
		}
		run.RunAgain += again
		closes = append(closes, fmt.Sprintf("%.0f", chunk.last.Sub(task.first).Seconds()))
		if chunk.last.After(lastChunk) {
			lastChunk = chunk.last
		}
	}
	if len(closes) > 0 && task.last.Sub(lastChunk) > lateClose {
		e.keepHistory(ctx, id)
	}
	for w, c := range why {
		log.Printf("fleet-size ops: %d batches run again after: %s", c, w)
	}
	if len(closes) > 0 {
		// A task that closes well after its last chunk waited on its
		// waits for them, not on hosts.
		log.Printf("fleet-size ops: chunks closed at %s s, the task at %.0f s after it began", strings.Join(closes, ", "), task.last.Sub(task.first).Seconds())
	}
}

// lateClose is how long after its last chunk a task may close before the
// bench keeps the task's history, to say what it waited on.
const lateClose = 5 * time.Second

// keepHistory writes workflow id's history beside the worker's log, in
// the form the replay tests read.
func (e *env) keepHistory(ctx context.Context, id string) {
	path := filepath.Join(e.logDir, strings.NewReplacer("/", "_", ":", "_").Replace(id)+".history.json")
	if err := testbed.SaveHistory(ctx, e.client, id, "", path); err != nil {
		log.Printf("fleet-size ops: %v", err)
		return
	}
	log.Printf("fleet-size ops: the task closed more than %s after its last chunk; its history is in %s", lateClose, path)
}

// histSpan is when a workflow's history began and when its last event was
// written.
type histSpan struct{ first, last time.Time }

// historySize is a workflow's history in events and bytes, and how many
// of its activities started more than once, tallying in why the failures
// that made them run again; 0 when it cannot be read.
func (e *env) historySize(ctx context.Context, id string, why map[string]int) (events, size, again int, when histSpan) {
	it := e.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return events, size, again, when
		}
		if events == 0 {
			when.first = ev.GetEventTime().AsTime()
		}
		when.last = ev.GetEventTime().AsTime()
		events++
		size += proto.Size(ev)
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
			again++
			f := a.GetLastFailure()
			w := tailOf(f.GetMessage(), 120)
			if t := f.GetTimeoutFailureInfo(); t != nil {
				w += " (" + t.GetTimeoutType().String() + ")"
			}
			why[w]++
		}
	}
	return events, size, again, when
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
