package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestLossTerminatedHostIsRestored terminates a host workflow while it
// supervises a process. The next ops on that host answer 9108 naming the
// way back and run nothing; no empty workflow takes its place; `starter
// host restore` brings the registry and supervision back, and a process
// killed afterwards is started again. `starter host forget` then starts
// the host over, only once confirmed.
func TestLossTerminatedHostIsRestored(t *testing.T) {
	t.Parallel() // it mostly waits
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	e.startWorker()
	it, pid := e.supervised(t, h, nil)
	host := proc.HostID{IP: h.IP}
	id := workflows.HostWorkflowID(host)
	clock := e.pollClock(t, h.IP, h, "clock")
	clock.await(t) // supervision is under way

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := e.client.TerminateWorkflow(ctx, id, "", "operator mistake"); err != nil {
		t.Fatal(err)
	}
	starts := startsLogged(t, h, "app")
	for _, op := range []proc.OpType{proc.OpStart, proc.OpStop, proc.OpStatus} {
		r := e.op(op, it)
		wantCode(t, op.String()+" on a lost host", r, proc.CodeHostLost)
		for _, way := range []string{"starter host restore 0:" + h.IP, "starter host forget 0:" + h.IP, "terminated"} {
			if !strings.Contains(r.Message, way) {
				t.Fatalf("%s on a lost host: message %q does not say %q", op, r.Message, way)
			}
		}
	}
	if n := startsLogged(t, h, "app"); n != starts {
		t.Fatalf("an op on a lost host ran start_cmd: %d starts, had %d", n, starts)
	}
	if !hostAlive(h, pid) {
		t.Fatalf("the stop on a lost host stopped pid %d", pid)
	}
	desc, err := e.client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil || desc.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_TERMINATED {
		t.Fatalf("the lost host workflow was replaced: %v %v", desc.GetWorkflowExecutionInfo().GetStatus(), err)
	}

	out, errOut, code := e.starter("", "host", "restore", "0:"+h.IP)
	if code != 0 || !strings.Contains(out, "restored "+id) {
		t.Fatalf("host restore: exit %d\n%s%s", code, out, errOut)
	}
	if en := e.entry(t, h.IP, it.Process); !en.Managed {
		t.Fatalf("restored registry: %+v, want the process managed", en)
	}
	clock.await(t) // the restored run supervises again
	pid = hostPid(t, h, "/data/app/svc.pid")
	if _, err := h.Exec(fmt.Sprintf("kill -9 %d", pid)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "restart of a process killed after the restore", liveNewPid(t, h, pid))
	wantCode(t, "status after the restore", e.op(proc.OpStatus, it), proc.CodeSuccess)

	// forget drops the registry, and only when told so.
	out, errOut, code = e.starter("", "host", "forget", "0:"+h.IP)
	if code != 2 || !strings.Contains(errOut, "--yes") {
		t.Fatalf("forget of a running host without --yes: exit %d\n%s%s", code, out, errOut)
	}
	wantCode(t, "status after a refused forget", e.op(proc.OpStatus, it), proc.CodeSuccess)
	out, errOut, code = e.starter("", "host", "forget", "0:"+h.IP, "--yes")
	if code != 0 || !strings.Contains(out, "started "+id+" over") {
		t.Fatalf("host forget --yes: exit %d\n%s%s", code, out, errOut)
	}
	wantCode(t, "status after forget", e.op(proc.OpStatus, it), proc.CodeNotRegistered)
}

// startsLogged counts the lines start_cmd appended to /data/<dir>/starts.log.
func startsLogged(t *testing.T, h interface{ Exec(string) (string, error) }, dir string) int {
	t.Helper()
	out, _ := h.Exec("grep -c start /data/" + dir + "/starts.log 2>/dev/null || true")
	var n int
	_, _ = fmt.Sscan(strings.TrimSpace(out), &n)
	return n
}
