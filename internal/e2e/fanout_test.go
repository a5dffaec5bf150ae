//go:build scale

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestFanOutThousandHosts registers a process on 1,000 inventory identities
// (one host workflow each, the task split into chunk workflows), then runs a
// status op over all of them. The identities share 10 sshd hosts through
// `address` and are kept apart by their own pid files,
// /data/fan/<identity ip>.pid: even identities point at the host's live
// sample, odd ones have none, so every identity's answer is its own.
// Run with `make test-scale` (DROVER_FANOUT changes the count).
func TestFanOutThousandHosts(t *testing.T) {
	identities, sshd := scaleIdentities(), 10
	e := newEnv(t, sshd)
	var hosts []map[string]any
	var items, registered []proc.Item
	for i := 0; i < identities; i++ {
		h := e.bed.Hosts[i%sshd]
		ip := fmt.Sprintf("10.9.%d.%d", i/250, i%250+1)
		hosts = append(hosts, map[string]any{"ip": ip, "bk_cloud_id": 0, "bk_supplier_id": 0, "address": h.IP})
		items = append(items, proc.Item{
			Target:  proc.Target{IP: ip},
			Process: proc.ProcessID{Namespace: "fan", Name: "sample"},
			Spec:    &proc.Spec{ProcName: "sample", SetupPath: "/data/fan", PidPath: "/data/fan/" + ip + ".pid"},
		})
		registered = append(registered, proc.Item{Target: proc.Target{IP: ip}, Process: proc.ProcessID{Namespace: "fan", Name: "sample"}})
	}
	for i, h := range e.bed.Hosts {
		pid, err := h.StartSample("fan", "sample", "")
		if err != nil {
			t.Fatal(err)
		}
		script := ""
		for j := i; j < identities; j += sshd {
			if j%2 == 0 {
				script += fmt.Sprintf("echo %d > /data/fan/%s.pid\n", pid, items[j].Target.IP)
			}
		}
		if _, err := h.Exec(script); err != nil {
			t.Fatal(err)
		}
	}
	e.writeInventory(hosts, nil)
	e.startWorker()

	began := time.Now()
	reg := e.runOperate(workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpSpecRegister, Items: items})
	regTook := time.Since(began)
	for _, r := range reg.Results {
		if r.Code != proc.CodeSuccess {
			t.Fatalf("register %s: %+v", r.Key, r.HostResult)
		}
	}
	began = time.Now()
	res := e.runOperate(workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStatus, Items: registered})
	took := time.Since(began)
	if len(res.Results) != identities {
		t.Fatalf("%d results, want %d", len(res.Results), identities)
	}
	for i, r := range res.Results {
		want := proc.CodeSuccess
		if i%2 == 1 {
			want = proc.CodeNotRunning
		}
		if r.Key != items[i].Key() || r.Code != want {
			t.Fatalf("result %d: %s %d (%s), want %s %d", i, r.Key, r.Code, r.Message, items[i].Key(), want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	regTask := e.historyLength(ctx, reg.TaskID)
	chunk := 0
	if identities > policies.ChunkSize {
		chunk = e.historyLength(ctx, reg.TaskID+"/chunk-0")
	}
	host := e.historyLength(ctx, workflows.HostWorkflowID(items[0].Target.HostID()))
	status := e.historyLength(ctx, res.TaskID)
	t.Logf("%d identities on %d sshd: register %s (history events: task %d, largest chunk %d, a host %d); status %s (task history %d events)",
		identities, sshd, regTook.Round(time.Millisecond), regTask, chunk, host, took.Round(time.Millisecond), status)
	// Far from the server's 51,200-event limit, and proportional to the
	// work each workflow holds: a few events per host for a chunk, a few
	// per batch for status.
	perChunk := min(identities, policies.ChunkSize)
	if regTask > 50+6*perChunk || chunk > 50+6*perChunk || host > 50 || status > 20+6*(identities/policies.StatusBatch+1) {
		t.Fatalf("histories too long for the work: register task %d, chunk %d, host %d, status task %d", regTask, chunk, host, status)
	}
}

func (e *env) historyLength(ctx context.Context, id string) int {
	e.t.Helper()
	it := e.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		if _, err := it.Next(); err != nil {
			e.t.Fatalf("history of %s: %v", id, err)
		}
		n++
	}
	return n
}

func scaleIdentities() int {
	if n, err := strconv.Atoi(os.Getenv("DROVER_FANOUT")); err == nil && n > 0 {
		return n
	}
	return 1000
}
