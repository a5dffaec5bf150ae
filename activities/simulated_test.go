package activities

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// TestSimulatedHostAnswersAsAHostWould: drover's own ops, parsed as from a
// real host, on a simulated one: a start runs the process and finds it
// alive, status reports it, a restart of that incarnation replaces it, a
// stop ends it, and a poll of the watch reads
// it running, then dead once its process is gone. Each identity is a host
// of its own.
func TestSimulatedHostAnswersAsAHostWould(t *testing.T) {
	inv, err := inventory.New("", inventory.Host{Transport: inventory.TransportSimulated}, nil,
		[]inventory.Host{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}})
	must(t, err)
	runner := &recordingRunner{Runner: transport.Multi{Simulated: transport.NewSimulated(0)}}
	a := &Activities{Inventory: inv, Runner: runner}
	spec := proc.Spec{ProcName: "svc", SetupPath: "/data/app", PidPath: "/data/app/svc.pid", AutoType: proc.AutoResident,
		StartCmd: "setsid ./svc 86400 </dev/null >/dev/null 2>&1 & echo $! > svc.pid", StopCmd: "kill $(cat svc.pid) && rm -f svc.pid",
		StartCheck: 10 * time.Millisecond, StopCheck: time.Second}
	var known HostOpOutput
	op := func(ip string, o proc.OpType) HostOpOutput {
		t.Helper()
		out, err := a.HostOp(context.Background(), HostOpInput{Op: o, Target: proc.Target{IP: ip},
			Process: proc.ProcessID{Namespace: "sim", Name: "svc"}, Spec: policies.WithDefaults(spec), Pid: known.Pid, StartTicks: known.StartTicks})
		must(t, err)
		return out
	}
	if out := op("10.0.0.1", proc.OpStart); out.Result.Code != proc.CodeSuccess || !out.Alive || out.Pid == 0 {
		t.Fatalf("start: %+v", out)
	}
	if out := op("10.0.0.1", proc.OpStart); out.Result.Code != proc.CodeAlreadyRunning {
		t.Fatalf("a second start: %+v", out)
	}
	if out := op("10.0.0.2", proc.OpStatus); out.Result.Code != proc.CodeNotRunning {
		t.Fatalf("status of the other host, where nothing was started: %+v", out)
	}
	if known = op("10.0.0.1", proc.OpStatus); known.Result.Code != proc.CodeSuccess || !known.Alive {
		t.Fatalf("status: %+v", known)
	}
	runner.take()
	if out := op("10.0.0.1", proc.OpRestart); out.Result.Code != proc.CodeSuccess || !out.Alive || out.Pid == known.Pid {
		t.Fatalf("restart of pid %d: %+v", known.Pid, out)
	}
	if outs := runner.take(); len(outs) != 1 || !strings.HasPrefix(outs[0], thenMarker+"\n") {
		t.Fatalf("restart of a known incarnation: want the stop and the start in one exec, got %q", outs)
	}
	known = HostOpOutput{}

	host, _ := inv.Lookup(proc.HostID{IP: "10.0.0.1"})
	w := newWatcher(WatchInput{Target: proc.Target{IP: "10.0.0.1"}, Entries: []WatchEntry{{Process: proc.ProcessID{Namespace: "sim", Name: "svc"},
		Spec: policies.WithDefaults(spec)}}}, platformFor(host))
	poll := func() []WatchEvent {
		t.Helper()
		res, err := a.Runner.Run(context.Background(), host, w.pollScript(time.Second))
		must(t, err)
		return w.observe(string(res.Stdout))
	}
	if ev := poll(); len(ev) != 0 {
		t.Fatalf("a poll of the running process: %+v", ev)
	}
	if out := op("10.0.0.1", proc.OpStop); out.Result.Code != proc.CodeSuccess || out.Alive {
		t.Fatalf("stop: %+v", out)
	}
	if ev := poll(); len(ev) != 1 || ev[0].Kind != WatchDead {
		t.Fatalf("a poll after the stop: %+v", ev)
	}
}
