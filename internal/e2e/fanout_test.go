//go:build scale

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// Server limits no task, chunk or host workflow may come near.
const (
	maxHistoryEvents = 51200
	maxHistoryBytes  = 50 << 20
)

// TestFanOutFleet runs start, status, restart and stop, each through
// `starter <verb> --wait`, over DROVER_FANOUT inventory identities (10,000)
// sharing DROVER_FANOUT_SSHD sshd hosts (20) through `address`. Each
// identity is its own process: a copy of sleep per sshd host, one pid file
// per identity, /data/fan/<identity ip>.pid. After each op every key must be
// answered by get_proc_operate_result with the op's success, and no
// workflow's history may come near the server's limits. It logs each op's
// time, as the scale section of docs/testing.md quotes them.
// Run with `make test-scale`; DROVER_FANOUT=1000 is a quick run.
func TestFanOutFleet(t *testing.T) {
	n, sshd := envInt("DROVER_FANOUT", 10000), envInt("DROVER_FANOUT_SSHD", 20)
	e := newEnv(t, sshd)
	for _, h := range e.bed.Hosts {
		if _, err := h.Exec(`mkdir -p /data/fan && cp "$(command -v sleep)" /data/fan/svc && rm -f /data/fan/*.pid`); err != nil {
			t.Fatal(err)
		}
	}
	var hosts []map[string]any
	var items []proc.Item
	for i := 0; i < n; i++ {
		ip := fmt.Sprintf("10.9.%d.%d", i/250, i%250+1)
		hosts = append(hosts, map[string]any{"ip": ip, "bk_cloud_id": 0, "bk_supplier_id": 0, "address": e.bed.Hosts[i%sshd].IP})
		pid := ip + ".pid"
		items = append(items, proc.Item{
			Target:  proc.Target{IP: ip},
			Process: proc.ProcessID{Namespace: "fan", Name: "svc"},
			Spec: &proc.Spec{ProcName: "svc", SetupPath: "/data/fan", PidPath: "/data/fan/" + pid,
				StartCmd:   "setsid ./svc 86400 </dev/null >/dev/null 2>&1 & echo $! > " + pid,
				StopCmd:    "kill $(cat " + pid + ") && rm -f " + pid,
				StartCheck: time.Second, StopCheck: time.Second},
		})
	}
	e.writeInventory(hosts, nil)
	// The dev server goes with the test binary: deleting every identity's
	// host workflow one by one would only cost the cleanup time.
	for _, it := range items {
		delete(e.hostIDs, workflows.HostWorkflowID(it.Target.HostID()))
	}
	// A start puts its process under supervision, and each supervised host
	// holds one long watch activity: 10,000 of them would measure
	// supervision (TestSupervisionCost does), not the ops' fan-out.
	e.cfg.NoSupervision = true
	e.startWorker()

	// The register carries every identity's inline spec: its task starts
	// only because the client splits it into chunks.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	regID := gseapi.NewTaskID(time.Now())
	began := time.Now()
	if err := engine.StartOperate(ctx, e.client, e.cfg.TaskQueue, workflows.OperateInput{TaskID: regID, Op: proc.OpSpecRegister, Items: items}); err != nil {
		t.Fatal(err)
	}
	stopWatch := e.watchCounts(ctx, "register", regID)
	reg, err := engine.WaitOperateAll(ctx, e.client, regID)
	stopWatch()
	if err != nil {
		t.Fatal(err)
	}
	if len(reg.Results) != n {
		t.Fatalf("register: %d results, want %d", len(reg.Results), n)
	}
	for _, r := range reg.Results {
		if r.Code != proc.CodeSuccess {
			t.Fatalf("register %s: %+v", r.Key, r.HostResult)
		}
	}
	t.Logf("register: %d identities in %s", n, time.Since(began).Round(time.Millisecond))
	e.checkHistories(ctx, "register", regID, n)

	eng := &engine.Engine{Client: e.client, TaskQueue: e.cfg.TaskQueue}
	for _, op := range []string{"start", "status", "restart", "stop"} {
		began := time.Now()
		out, errOut, code := e.starter("", op, "--namespace", "fan", "--name", "svc", "--hosts", "all", "--wait", "-o", "json")
		took := time.Since(began)
		var rows []struct {
			Key     string    `json:"key"`
			Code    proc.Code `json:"error_code"`
			Message string    `json:"error_msg"`
		}
		if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != n {
			t.Fatalf("%s: exit %d, %d rows (%v), want %d\n%s", op, code, len(rows), err, n, tail(errOut+out, 2000))
		}
		failed := map[proc.Code]int{}
		example := map[proc.Code]string{}
		for _, r := range rows {
			if r.Code != proc.CodeSuccess {
				failed[r.Code]++
				example[r.Code] = r.Key + ": " + r.Message
			}
		}
		if code != 0 || len(failed) > 0 {
			t.Fatalf("%s: exit %d after %s; failed by code %v, e.g. %v", op, code, time.Since(began).Round(time.Second), failed, example)
		}
		// --wait draws progress from counts: the last line is every
		// identity done, none failed.
		ticks := strings.Split(strings.TrimSpace(errOut), "\r")
		last := ticks[len(ticks)-1]
		if want := fmt.Sprintf("%d/%d done, 0 failed", n, n); !strings.Contains(last, want) {
			t.Fatalf("%s: progress ends %q, want %q", op, last, want)
		}
		id := regexp.MustCompile(`GSETASK:\d+:\d+`).FindString(last)
		resp, _ := gseapi.Call(ctx, eng, gseapi.APIGetProcOperateResult, []byte(`{"task_id":"`+id+`"}`), false)
		b, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		res := decodeResult(t, string(b))
		if len(res.Data) != n {
			t.Fatalf("%s: get_proc_operate_result answers %d keys, want %d", op, len(res.Data), n)
		}
		for _, it := range items {
			r, ok := res.Data[it.Key()]
			if !ok || r.ErrorCode != int(proc.CodeSuccess) {
				t.Fatalf("%s: %s: %+v (found %v)", op, it.Key(), r, ok)
			}
			if op == "status" && decodeStatus(t, r.Content).Process[0].Instance[0].Pid <= 0 {
				t.Fatalf("status: %s: not running: %s", it.Key(), r.Content)
			}
		}
		t.Logf("%s: %d identities on %d sshd in %s (%d progress ticks)", op, n, sshd, took.Round(time.Millisecond), len(ticks))
		e.checkHistories(ctx, op, id, n)
	}
	host := workflows.HostWorkflowID(items[0].Target.HostID())
	if events, size := e.historySize(ctx, host); events > 200 || size > maxHistoryBytes {
		t.Fatalf("host %s: history %d events, %d bytes", host, events, size)
	}
}

// checkHistories logs a task's history and its first chunk's, and fails
// when either grows with the fleet or nears a server limit: the task holds
// a few events per chunk, a chunk a few per item.
func (e *env) checkHistories(ctx context.Context, op, id string, n int) {
	e.t.Helper()
	events, size := e.historySize(ctx, id)
	chunkEvents, chunkSize := 0, 0
	if n > policies.ChunkSize {
		chunkEvents, chunkSize = e.historySize(ctx, workflows.SplitChunkID(id, 0))
	}
	e.t.Logf("%s histories: task %d events %d bytes; chunk-0 %d events %d bytes", op, events, size, chunkEvents, chunkSize)
	perChunk := min(n, policies.ChunkSize)
	chunks := (n + policies.ChunkSize - 1) / policies.ChunkSize
	if n > policies.ChunkSize && (events > 50+6*chunks || size > 64<<10*chunks) {
		e.t.Fatalf("%s: task history %d events, %d bytes for %d chunks", op, events, size, chunks)
	}
	if events > 50+6*perChunk || chunkEvents > 50+6*perChunk || size > maxHistoryBytes || chunkSize > maxHistoryBytes/4 {
		e.t.Fatalf("%s: histories too large: task %d events %d bytes, chunk %d events %d bytes", op, events, size, chunkEvents, chunkSize)
	}
	if events > maxHistoryEvents/10 || chunkEvents > maxHistoryEvents/10 {
		e.t.Fatalf("%s: histories near the event limit", op)
	}
}

// historySize is a workflow's history length in events and bytes.
func (e *env) historySize(ctx context.Context, id string) (events, size int) {
	e.t.Helper()
	it := e.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			e.t.Fatalf("history of %s: %v", id, err)
		}
		events++
		size += proto.Size(ev)
	}
	return events, size
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func (e *env) historyLength(ctx context.Context, id string) int {
	n, _ := e.historySize(ctx, id)
	return n
}

// watchCounts logs a task's counts every 15 s until stopped, so a slow run
// shows where it spends its time.
func (e *env) watchCounts(ctx context.Context, what, id string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(15 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				c, err := engine.TaskCounts(ctx, e.client, id)
				e.t.Logf("%s: %d/%d done, %d failed (%v)", what, c.Done, c.Total, c.Failed, err)
			}
		}
	}()
	return func() { cancel(); <-done }
}
