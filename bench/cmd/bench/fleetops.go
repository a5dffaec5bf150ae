package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/cli"
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
}

// fleetOpsRun is one op at one size.
type fleetOpsRun struct {
	Took time.Duration
	// OK is the keys answered with the op's success (status: running),
	// Keys those get_proc_operate_result answered.
	OK, Keys int
	Failed   map[proc.Code]int
	Example  string
	Ticks    int
	// The task's history and its first chunk's, in events and bytes.
	TaskEvents, TaskBytes, ChunkEvents, ChunkBytes int
	Err                                            string
}

// fleetOpsResult is every op at every size.
type fleetOpsResult struct {
	fleetOpsSettings
	Runs map[int]map[string]*fleetOpsRun
}

// fleetOps runs the part. A failed op is recorded and the next still runs:
// the table shows what held and what did not.
func (e *env) fleetOps(ctx context.Context, f fleetOpsSettings) (*fleetOpsResult, error) {
	r := &fleetOpsResult{fleetOpsSettings: f, Runs: map[int]map[string]*fleetOpsRun{}}
	if f.sshd > len(e.bed.Hosts) {
		return r, fmt.Errorf("BENCH_FLEETOPS_SSHD %d: the bed has %d hosts", f.sshd, len(e.bed.Hosts))
	}
	shared := e.bed.Hosts[:f.sshd]
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
	w, err := cli.StartWorker(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return r, err
	}
	defer w.Stop()
	for _, n := range f.sizes {
		runs := map[string]*fleetOpsRun{}
		r.Runs[n] = runs
		for _, op := range fleetOpsOps {
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			var run *fleetOpsRun
			if op == "register" {
				run = e.fleetOpsRegister(ctx, items[n])
			} else {
				run = e.fleetOpsStarter(ctx, cfg.Inventory, op, n)
			}
			runs[op] = run
			log.Printf("fleet-size ops: %s on %d identities: %s, %d/%d ok, %d keys read back %s", op, n,
				run.Took.Round(100*time.Millisecond), run.OK, n, run.Keys, run.Err)
		}
	}
	return r, nil
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
			hosts = append(hosts, map[string]any{"ip": ip, "bk_cloud_id": 0, "bk_supplier_id": 0,
				"address": e.bed.Hosts[i%f.sshd].IP, "groups": []string{fleetOpsGroup(n)}})
			pid := ip + ".pid"
			items[n] = append(items[n], proc.Item{
				Target:  proc.Target{IP: ip},
				Process: proc.ProcessID{Namespace: fleetOpsNS, Name: fleetOpsName},
				Spec: &proc.Spec{ProcName: fleetOpsName, SetupPath: fleetOpsDir, PidPath: fleetOpsDir + "/" + pid,
					StartCmd:   "setsid ./svc 86400 </dev/null >/dev/null 2>&1 & echo $! > " + pid,
					StopCmd:    "kill $(cat " + pid + ") && rm -f " + pid,
					StartCheck: time.Second, StopCheck: time.Second},
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

// fleetOpsRegister registers the process on every identity with an inline
// spec through the workflow API: a task the client must split to start.
func (e *env) fleetOpsRegister(ctx context.Context, items []proc.Item) *fleetOpsRun {
	run := &fleetOpsRun{Failed: map[proc.Code]int{}}
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	in := workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpSpecRegister, Items: items}
	began := time.Now()
	if err := workflows.StartOperate(ctx, e.client, fleetOpsQueue, in); err != nil {
		run.Err = err.Error()
		return run
	}
	res, err := workflows.WaitOperateAll(ctx, e.client, in.TaskID)
	run.Took = time.Since(began)
	if err != nil {
		run.Err = err.Error()
		return run
	}
	run.Keys = len(res.Results)
	for _, r := range res.Results {
		if r.Code == proc.CodeSuccess {
			run.OK++
		} else {
			run.Failed[r.Code]++
			run.Example = r.Key + ": " + r.Message
		}
	}
	e.fleetOpsHistories(ctx, in.TaskID, len(items), run)
	return run
}

var taskIDPattern = regexp.MustCompile(`GSETASK:\d+:\d+`)

// fleetOpsStarter runs `starter OP --wait -o json` over the group of n
// identities, as an operator would, then reads the task's results back
// through get_proc_operate_result.
func (e *env) fleetOpsStarter(ctx context.Context, inventory, op string, n int) *fleetOpsRun {
	run := &fleetOpsRun{Failed: map[proc.Code]int{}}
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(e.s.bin, "starter"), op, "--namespace", fleetOpsNS, "--name", fleetOpsName,
		"--hosts", "group:"+fleetOpsGroup(n), "--wait", "-o", "json",
		"--temporal-address", e.cfg.TemporalAddress, "--task-queue", fleetOpsQueue, "--inventory", inventory)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	began := time.Now()
	runErr := cmd.Run()
	run.Took = time.Since(began)
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
		if r.Code == proc.CodeSuccess {
			run.OK++
		} else {
			run.Failed[r.Code]++
			run.Example = r.Key + ": " + r.Message
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
	eng := &workflows.Engine{Client: e.client, TaskQueue: fleetOpsQueue}
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
		return run
	}
	run.Keys = len(read.Data)
	e.fleetOpsHistories(ctx, id, n, run)
	return run
}

// fleetOpsHistories measures a task's history and its first chunk's.
func (e *env) fleetOpsHistories(ctx context.Context, id string, n int, run *fleetOpsRun) {
	run.TaskEvents, run.TaskBytes = e.historySize(ctx, id)
	if n > policies.ChunkSize {
		run.ChunkEvents, run.ChunkBytes = e.historySize(ctx, workflows.SplitChunkID(id, 0))
	}
}

// historySize is a workflow's history in events and bytes; 0 when it
// cannot be read.
func (e *env) historySize(ctx context.Context, id string) (events, size int) {
	it := e.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return events, size
		}
		events++
		size += proto.Size(ev)
	}
	return events, size
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
