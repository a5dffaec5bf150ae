package e2e

import (
	"testing"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestOpsNeverWaitBehindWatches: a worker with two activity slots
// supervises three hosts, every host's watch running at once, and its ops
// still run: watches hold slots of their own, on their own queue. On the
// ops' queue, the watches would take both slots for up to an hour.
func TestOpsNeverWaitBehindWatches(t *testing.T) {
	e := newEnv(t, 3)
	e.cfg.MaxConcurrentActivities = 2
	e.startWorker()
	var clocks []pollClock
	for i, h := range e.bed.Hosts {
		clocks = append(clocks, e.pollClock(t, h.IP, h, "clock"))
		t.Logf("host %d watched", i)
	}
	// Every host's watch is polling, each holding its slot.
	awaitPolls(t, clocks)
	var items []proc.Item
	for _, h := range e.bed.Hosts {
		items = append(items, proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "clock", Name: "clock"}})
	}
	res := e.runOperate(workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStatus, Items: items})
	for _, r := range res.Results {
		if r.Code != proc.CodeSuccess {
			t.Fatalf("status of %s while every host is watched: %+v", r.Key, r.HostResult)
		}
	}
	// And supervision still acts on all of them.
	awaitPolls(t, clocks)
}
