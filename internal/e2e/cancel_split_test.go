package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestCancelSplitTask cancels a start of more than ChunkSize identities,
// which the client split into chunk workflows, while every start_cmd waits
// for a gate that never opens. `starter cancel` names only the task; the
// task must hand the cancel to each chunk, so every identity, in every
// chunk, answers 9109 and no waiting start_cmd is left on the hosts.
func TestCancelSplitTask(t *testing.T) {
	n := policies.ChunkSize + 20
	e := newEnv(t, 2)
	var hosts []map[string]any
	var items []proc.Item
	for i := 0; i < n; i++ {
		ip := fmt.Sprintf("10.7.%d.%d", i/250, i%250+1)
		hosts = append(hosts, map[string]any{"ip": ip, "bk_cloud_id": 0, "address": e.bed.Hosts[i%2].IP})
		items = append(items, proc.Item{Target: proc.Target{IP: ip}, Process: proc.ProcessID{Namespace: "gate", Name: "svc"},
			Spec: &proc.Spec{ProcName: "svc", SetupPath: "/data/gate", PidPath: "/data/gate/" + ip + ".pid",
				StartCmd:  "while [ ! -e /data/gate/go ]; do sleep 0.1; done",
				OpTimeout: 15 * time.Minute}})
	}
	for _, h := range e.bed.Hosts {
		if _, err := h.Exec("mkdir -p /data/gate"); err != nil {
			t.Fatal(err)
		}
	}
	e.writeInventory(hosts, nil)
	e.startWorker()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	task := gseapi.NewTaskID(time.Now())
	if err := engine.StartOperate(ctx, e.client, e.cfg.TaskQueue, workflows.OperateInput{TaskID: task, Op: proc.OpStart, Items: items}); err != nil {
		t.Fatal(err)
	}
	// Both chunks are running their items: some start_cmd waits on each
	// sshd host (each chunk's identities span both).
	waitFor(t, 3*time.Minute, "start commands waiting on both hosts", func() bool {
		for _, h := range e.bed.Hosts {
			out, _ := h.Exec("pgrep -f 'while \\[ ! -e /data/gat[e]' | wc -l")
			if strings.TrimSpace(out) == "0" {
				return false
			}
		}
		return true
	})
	if out, errOut, code := e.starter("", "cancel", task); code != 0 {
		t.Fatalf("starter cancel: exit %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpStuckHosts(t, items)
		}
	})
	res := e.waitOp(t, task, 5*time.Minute)
	if len(res) != n {
		t.Fatalf("%d answers, want %d", len(res), n)
	}
	for i, it := range items {
		if r := res[it.Target.IP]; r.Code != proc.CodeCancelled {
			t.Fatalf("identity %d (chunk %d): %d %q, want 9109", i, i/policies.ChunkSize, r.Code, r.Message)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpLeftovers(t)
		}
	})
	waitFor(t, 2*time.Minute, "the cancelled start_cmds gone from the hosts", func() bool {
		for _, h := range e.bed.Hosts {
			out, _ := h.Exec("pgrep -f 'while \\[ ! -e /data/gat[e]' || true")
			if strings.TrimSpace(out) != "" {
				return false
			}
		}
		return true
	})
}
