package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestWatchFailureThenRenewal drives the host workflow paths no other test
// reaches: a watch that fails for good (its host left the inventory, so
// every attempt errs), supervision resuming after the backoff once the host
// is back, and a renew signal that continues the workflow as new. The run
// that continued is recorded for the replay tests.
//
// It waits out the watch's ten retries and the backoff after them (about
// four minutes), so it runs with `make chaos` and when recording.
func TestWatchFailureThenRenewal(t *testing.T) {
	if !chaosFull() && os.Getenv("DROVER_RECORD_HISTORIES") == "" {
		t.Skip("slow: runs with DROVER_CHAOS=full (make chaos) or DROVER_RECORD_HISTORIES")
	}
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	e.startWorker()
	it, pid := e.supervised(t, h, nil)
	id := workflows.HostWorkflowID(proc.HostID{IP: h.IP})

	// A worker whose inventory lacks the host: each watch attempt fails
	// until its retries run out.
	good := e.cfg.Inventory
	e.worker.Stop()
	e.writeInventory([]map[string]any{{"ip": "10.9.9.9", "bk_cloud_id": 0, "address": h.IP}}, nil)
	e.startWorker()
	waitFor(t, 5*time.Minute, "watch failure event", e.hasEvent(t, h, workflows.EventWatchFailed))

	// The host is back; once the backoff is over, a death is repaired.
	e.worker.Stop()
	e.cfg.Inventory = good
	e.startWorker()
	if _, err := h.Exec(fmt.Sprintf("kill -9 %d", pid)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "restart after the watch resumed", liveNewPid(t, h, pid))
	waitFor(t, 10*time.Second, "restart event", e.hasEvent(t, h, workflows.EventRestartSuccess))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	desc, err := e.client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	first := desc.WorkflowExecutionInfo.Execution.RunId
	if err := e.client.SignalWorkflow(ctx, id, "", workflows.RenewSignal, nil); err != nil {
		t.Fatal(err)
	}
	// The renewal takes effect at the host's next op.
	wantCode(t, "manage after renew", e.op(proc.OpRegister, it), proc.CodeSuccess)
	waitFor(t, 30*time.Second, "a new run", func() bool {
		d, err := e.client.DescribeWorkflowExecution(ctx, id, "")
		return err == nil && d.WorkflowExecutionInfo.Execution.RunId != first
	})
	if en := e.entry(t, h.IP, it.Process); !en.Managed {
		t.Fatalf("the new run lost the registry: %+v", en)
	}
	e.recordRunHistory(id, first, "host-watch-failed-continued-as-new")
}

// TestChunkedStatusOp runs a status op of more than one chunk over
// identities that share one sshd through `address`, and records the task
// and its chunks for the replay tests. No identity has a registered
// process, so each answers 9106 without a host workflow.
func TestChunkedStatusOp(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	const n = 501
	var hosts []map[string]any
	var items []proc.Item
	for i := 0; i < n; i++ {
		ip := fmt.Sprintf("10.8.%d.%d", i/250, i%250+1)
		hosts = append(hosts, map[string]any{"ip": ip, "bk_cloud_id": 0, "address": h.IP})
		items = append(items, proc.Item{Target: proc.Target{IP: ip}, Process: proc.ProcessID{Namespace: "chunk", Name: "svc"}})
	}
	e.writeInventory(hosts, nil)
	e.startWorker()
	res := e.runOperate(workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStatus, Items: items})
	if len(res.Results) != n {
		t.Fatalf("%d results, want %d", len(res.Results), n)
	}
	for i, r := range res.Results {
		if r.Key != items[i].Key() || r.Code != proc.CodeNotRegistered {
			t.Fatalf("result %d: %s %d (%s), want %s 9106", i, r.Key, r.Code, r.Message, items[i].Key())
		}
	}
	// The client split the task: its history waits for its chunks by
	// id. operate-status-chunked and operate-status-chunk are the same op
	// from before, run as child workflows, and still replay.
	e.recordHistory(res.TaskID, "operate-status-split")
	e.recordHistory(workflows.SplitChunkID(res.TaskID, 1), "operate-status-split-chunk")
}
