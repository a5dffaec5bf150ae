package activities

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// TestControlWaitsForTheCommandALostAttemptLeft: an attempt lost with its
// worker (or its workflow task) left its command running, noted in its
// file. The op run again starts no second command: it waits for that one
// and reports it ended.
func TestControlWaitsForTheCommandALostAttemptLeft(t *testing.T) {
	dir := t.TempDir()
	request := fmt.Sprintf("T%d#0", time.Now().UnixNano())
	pidFile := controlPidFile(request, 1)
	t.Cleanup(func() { _ = os.Remove(pidFile) })
	t.Cleanup(func() { _ = os.WriteFile(dir+"/go", nil, 0o644) })
	gate := "while [ ! -e " + dir + "/go ]; do sleep 0.1; done; echo first >> " + dir + "/ran"
	go func() {
		_, _ = localRunner{}.Run(context.Background(), inventory.Host{}, controlScript(opMark{}, dir, gate, time.Minute, &noting{files: opFilesOf(request), attempt: 1}))
	}()
	waitFile(t, pidFile)

	again := make(chan transport.Result, 1)
	go func() {
		script := controlScript(opMark{}, dir, "echo second >> "+dir+"/ran", time.Minute, &noting{files: opFilesOf(request), attempt: 1, upto: 2})
		res, _ := localRunner{}.Run(context.Background(), inventory.Host{}, script)
		again <- res
	}()
	select {
	case res := <-again:
		t.Fatalf("the op run again ended while the lost attempt's command still ran: %q", res.Stdout)
	case <-time.After(time.Second):
	}
	must(t, os.WriteFile(dir+"/go", nil, 0o644))
	select {
	case res := <-again:
		o, complete := parseControl(string(res.Stdout))
		if !complete || o.RC != 0 || o.TimedOut || !strings.Contains(o.Output, "earlier attempt") {
			t.Fatalf("the op run again: %+v (complete %v), want it to report the earlier command ended", o, complete)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the op run again never ended after the lost attempt's command did")
	}
	b, err := os.ReadFile(dir + "/ran")
	must(t, err)
	if got := strings.TrimSpace(string(b)); got != "first" {
		t.Fatalf("commands run: %q, want only the lost attempt's", got)
	}
}

// TestStartRunAgainAfterALostTaskKnowsItsOwnStart: a task's start whose
// attempt was lost after it started the process is run again as if new
// (a local activity's workflow task timed out). It finds its own request
// in the process's op marker and answers 0, not 828; another request
// finding the same process answers 828.
func TestStartRunAgainAfterALostTaskKnowsItsOwnStart(t *testing.T) {
	me, err := user.Current()
	must(t, err)
	dir := t.TempDir()
	inv, err := inventory.New("", inventory.Host{}, nil, []inventory.Host{{IP: "10.0.0.9"}})
	must(t, err)
	a := &Activities{Inventory: inv, Runner: localRunner{}}
	spec := proc.Spec{ProcName: "sleep", SetupPath: dir, PidPath: dir + "/svc.pid", Account: me.Username,
		StartCmd: "sleep 30 & echo $! > svc.pid", StopCmd: "kill $(cat svc.pid)", StartCheck: 200 * time.Millisecond,
		AutoType: proc.AutoResident, OpTimeout: 30 * time.Second}
	in := HostOpInput{Op: proc.OpStart, Attempt: 1, Target: proc.Target{IP: "10.0.0.9"},
		Process: proc.ProcessID{Namespace: "t", Name: fmt.Sprint(time.Now().UnixNano())}, Spec: spec}
	marker := (&opRun{in: in, plat: linuxPlatform{}, spec: spec}).opMarkerFile()
	t.Cleanup(func() { _ = os.Remove(marker) })
	op := func(op proc.OpType, request string) HostOpOutput {
		t.Helper()
		in := in
		in.Op, in.RequestID = op, request
		out, err := a.HostOp(context.Background(), in)
		must(t, err)
		return out
	}
	first := fmt.Sprintf("T%d#0", time.Now().UnixNano())
	t.Cleanup(func() { op(proc.OpStop, "cleanup#0") })
	if out := op(proc.OpStart, first); out.Result.Code != proc.CodeSuccess || !out.Started {
		t.Fatalf("start: %+v", out)
	}
	if out := op(proc.OpStart, first); out.Result.Code != proc.CodeSuccess || !out.Started {
		t.Fatalf("the same start run again: %+v, want 0: it started the process itself", out)
	}
	if out := op(proc.OpStart, "U#0"); out.Result.Code != proc.CodeAlreadyRunning {
		t.Fatalf("another start: %+v, want 828", out.Result)
	}
	b, err := os.ReadFile(dir + "/svc.pid")
	must(t, err)
	if pid := strings.TrimSpace(string(b)); pid == "" {
		t.Fatal("no pid file")
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	began := time.Now()
	for {
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != "" {
			return
		}
		if time.Since(began) > 10*time.Second {
			t.Fatalf("%s never written", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCommandStartedAfterItsCancelEndsItself: a cancel that reached the
// host before the op's command was noted (its script was still on its way)
// found nothing to end; the command, once started and noted, ends itself.
func TestCommandStartedAfterItsCancelEndsItself(t *testing.T) {
	dir := t.TempDir()
	request := fmt.Sprintf("T%d#0", time.Now().UnixNano())
	files := opFilesOf(request)
	t.Cleanup(func() { _ = os.Remove(files.cancelled()); _ = os.WriteFile(dir+"/go", nil, 0o644) })
	runLocal(t, endScript(files, 1))
	done := make(chan transport.Result, 1)
	go func() {
		script := controlScript(opMark{}, dir, "while [ ! -e "+dir+"/go ]; do sleep 0.1; done", time.Minute, &noting{files: files, attempt: 1})
		res, _ := localRunner{}.Run(context.Background(), inventory.Host{}, script)
		done <- res
	}()
	select {
	case res := <-done:
		if o, complete := parseControl(string(res.Stdout)); !complete || o.RC != 137 {
			t.Fatalf("the command started after the cancel: %+v, want it killed (rc 137)", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command started after its op's cancel still runs")
	}
}

// TestEndLeavesAProcessThatTookANotedPid: a note left by a script killed
// before it could remove it names a pid the host may since have given to
// another process (another op's script, a group leader). Ending the op
// kills only the process the note names, by its start time.
func TestEndLeavesAProcessThatTookANotedPid(t *testing.T) {
	request := fmt.Sprintf("T%d#0", time.Now().UnixNano())
	files := opFilesOf(request)
	t.Cleanup(func() { _ = os.Remove(files.cancelled()); _ = os.Remove(files.note(1)) })
	other := exec.Command("setsid", "sleep", "30")
	must(t, other.Start())
	t.Cleanup(func() { _ = other.Process.Kill(); _, _ = other.Process.Wait() })
	// The note of the op's long-gone command, whose pid the other now has.
	must(t, os.WriteFile(files.note(1), []byte(fmt.Sprintf("%d 1\n", other.Process.Pid)), 0o644))
	runLocal(t, endScript(files, 1))
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("ending the op killed the process that took its noted pid: %v", err)
	}
}
