package activities

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// recordingRunner runs scripts locally and keeps what each exec printed.
type recordingRunner struct {
	transport.Runner
	mu   sync.Mutex
	outs []string
}

func (r *recordingRunner) Run(ctx context.Context, h inventory.Host, cmd transport.Command) (transport.Result, error) {
	res, err := r.Runner.Run(ctx, h, cmd)
	r.mu.Lock()
	r.outs = append(r.outs, string(res.Stdout))
	r.mu.Unlock()
	return res, err
}

func (r *recordingRunner) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.outs
	r.outs = nil
	return out
}

// TestControlAndItsCheckShareOneExec: a start is one exec that probes,
// runs start_cmd when nothing runs, waits start_check and checks; a start
// of a running process is that exec's probe alone. A stop is a probe and
// one exec that runs stop_cmd and checks, even when stop_cmd exits
// non-zero; one exec when the op knows the incarnation the pid file
// still names. A start whose command fails neither waits nor checks.
func TestControlAndItsCheckShareOneExec(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sleep)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "svcprog"), b, 0o755))
	pidFile := filepath.Join(dir, "svcprog.pid")
	t.Cleanup(func() { _ = exec.Command("sh", "-c", "kill $(cat '"+pidFile+"') 2>/dev/null").Run() })
	runner := &recordingRunner{Runner: localRunner{}}
	a := oneHost(t, runner)
	spec := proc.Spec{ProcName: "svcprog", SetupPath: dir, PidPath: pidFile, Account: me.Username, AutoType: proc.AutoResident,
		// The command prints the marker itself: only the script's own
		// separates the command's output from the check's.
		StartCmd: "echo " + checkMarker + "; ./svcprog 60 </dev/null >/dev/null 2>&1 & echo $! > svcprog.pid",
		StopCmd:  "kill $(cat svcprog.pid); exit 3",
		// A killed process that waits for a loaded machine's CPU outlives
		// its signal: the stop's check time is ample, and a quick exit
		// costs no more of it.
		StartCheck: 100 * time.Millisecond, StopCheck: 10 * time.Second, OpTimeout: 30 * time.Second}
	var known HostOpOutput
	run := func(op proc.OpType, s proc.Spec) HostOpOutput {
		t.Helper()
		out, err := a.HostOp(context.Background(), HostOpInput{Op: op, Target: proc.Target{IP: "10.0.0.1"},
			Process: proc.ProcessID{Namespace: "gse", Name: "svcprog"}, Spec: s, Pid: known.Pid, StartTicks: known.StartTicks})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	execs := func(what string, want int) []string {
		t.Helper()
		outs := runner.take()
		if len(outs) != want {
			t.Fatalf("%s: want %d exec(s), got %d: %q", what, want, len(outs), outs)
		}
		return outs
	}

	out := run(proc.OpStart, spec)
	checkMessage(t, "start", out.Result, proc.CodeSuccess)
	if !out.Alive || out.Pid == 0 {
		t.Fatalf("start: the check saw no live process: %+v", out)
	}
	if outs := execs("start", 1); !strings.Contains(outs[0], "\n"+checkMarker+"\nH\t") {
		t.Fatalf("start: want start_cmd and its check in the exec: %q", outs)
	}

	again := run(proc.OpStart, spec)
	checkMessage(t, "start of a running process", again.Result, proc.CodeAlreadyRunning, fmt.Sprintf("pid %d", out.Pid))
	if outs := execs("start of a running process", 1); !strings.HasPrefix(outs[0], guardMarker+"\n") || strings.Contains(outs[0], "__drover_rc__") {
		t.Fatalf("start of a running process: want its probe alone, nothing run: %q", outs)
	}

	out = run(proc.OpStop, spec)
	checkMessage(t, "stop", out.Result, proc.CodeSuccess, "process(svcprog) is gone, but the stop command exited 3")
	execs("stop", 2)

	// The op knows the incarnation: one exec, no probe before stop_cmd;
	// one it no longer names (another start since) costs the probe again.
	known = run(proc.OpStart, spec)
	runner.take()
	out = run(proc.OpStop, spec)
	checkMessage(t, "stop of the known incarnation", out.Result, proc.CodeSuccess, "process(svcprog) is gone")
	execs("stop of the known incarnation", 1)
	run(proc.OpStart, spec)
	runner.take()
	out = run(proc.OpStop, spec)
	checkMessage(t, "stop of a later incarnation", out.Result, proc.CodeSuccess, "process(svcprog) is gone")
	if outs := execs("stop of a later incarnation", 2); !strings.HasPrefix(outs[0], guardMarker+"\n") {
		t.Fatalf("stop of a later incarnation: want the guarded exec's probe first: %q", outs)
	}

	// A restart of the known incarnation is one exec: stop_cmd, then,
	// the process gone, start_cmd and its check.
	known = run(proc.OpStart, spec)
	runner.take()
	out = run(proc.OpRestart, spec)
	checkMessage(t, "restart of the known incarnation", out.Result, proc.CodeSuccess)
	if !out.Alive || out.Pid == 0 || out.Pid == known.Pid {
		t.Fatalf("restart: want a new live incarnation after pid %d, got %+v", known.Pid, out)
	}
	if outs := execs("restart of the known incarnation", 1); !strings.HasPrefix(outs[0], thenMarker+"\n") || !strings.Contains(outs[0], "\n"+checkMarker+"\nH\t") {
		t.Fatalf("restart: want the stop, the start and its check in one exec: %q", outs)
	}
	// A stop that leaves it running ends the restart in the stop's
	// check: nothing is started, and the exec, which looked for the
	// process throughout stop_check, was that check.
	known = out
	stubborn := spec
	stubborn.StopCmd, stubborn.StopCheck = "true", 100*time.Millisecond
	out = run(proc.OpRestart, stubborn)
	checkMessage(t, "restart whose stop leaves it running", out.Result, proc.CodePostCheck, "still alive", fmt.Sprintf("pid %d", known.Pid))
	if outs := execs("restart whose stop leaves it running", 1); !strings.HasPrefix(outs[0], aloneMarker+"\n") || strings.Contains(outs[0], thenMarker) {
		t.Fatalf("restart whose stop leaves it running: want the stop's exec alone: %q", outs)
	}
	// A start that fails after the stop answers the start's failure.
	noStart := spec
	noStart.StartCmd = "echo cannot start; exit 4"
	out = run(proc.OpRestart, noStart)
	checkMessage(t, "restart whose start fails", out.Result, proc.CodeCommandFailed, "restart command exited 4: cannot start")
	if outs := execs("restart whose start fails", 1); !strings.HasPrefix(outs[0], thenMarker+"\n") || strings.Contains(outs[0], checkMarker+"\nH") {
		t.Fatalf("restart whose start fails: want one exec, unchecked: %q", outs)
	}
	known = HostOpOutput{}

	failing := spec
	failing.StartCmd, failing.StartCheck = "echo cannot start; exit 4", time.Hour
	out = run(proc.OpStart, failing)
	checkMessage(t, "failing start", out.Result, proc.CodeCommandFailed, "start command exited 4: cannot start")
	outs := runner.take()
	if len(outs) != 1 || strings.Contains(outs[0], "\n"+checkMarker+"\n") {
		t.Fatalf("failing start: its exec must end without waiting or checking; got %q", outs)
	}
}

// TestRestartLooksForItsStopsEndEachTenth: a restart's start follows its
// stop in the same exec as soon as the stopped process has gone, looked
// for every 0.1 s within stop_check, not after all of it; a process that
// outlives stop_check was looked for throughout, and the start is left to
// the stop's check. The host's sleep is wrapped to count the looks.
func TestRestartLooksForItsStopsEndEachTenth(t *testing.T) {
	me, err := user.Current()
	must(t, err)
	sleepBin, err := exec.LookPath("sleep")
	must(t, err)
	base := t.TempDir()
	shim, log := filepath.Join(base, "bin"), filepath.Join(base, "sleeps")
	must(t, os.Mkdir(shim, 0o755))
	must(t, os.WriteFile(filepath.Join(shim, "sleep"), []byte("#!/bin/sh\necho \"$@\" >> '"+log+"'\nexec '"+sleepBin+"' \"$@\"\n"), 0o755))
	for _, c := range []struct {
		name, onTerm string
		check        time.Duration
		then         bool
	}{
		{"gone after 0.3 s of a 10 s check", "sleep 0.3; exit 0", 10 * time.Second, true},
		{"alive through a 1 s check", "", time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "svc.pid")
			victim := exec.Command("sh", "-c", "trap '"+c.onTerm+"' TERM; while :; do sleep 1 & wait $!; done")
			must(t, victim.Start())
			t.Cleanup(func() { _ = victim.Process.Kill(); _ = victim.Wait() })
			must(t, os.WriteFile(pidFile, []byte(strconv.Itoa(victim.Process.Pid)+"\n"), 0o644))
			out, err := shCommand(ProbeScript([]string{pidFile}, 0)).Output()
			must(t, err)
			info, samples, err := ParseProbe(string(out), 1)
			must(t, err)
			_ = os.Remove(log)
			x := controlExec{verb: "restart", cmd: "kill $(cat svc.pid)", wait: c.check,
				guard: incarnationGuard(samples[0].Pid, samples[0].StartTicks), then: "echo started"}
			cmd := shCommand(checkedControlScript(opMark{}, dir, 30*time.Second, nil, pidFile, knownHost(info), me.Username, x))
			cmd.Env = append(os.Environ(), "PATH="+shim+":"+os.Getenv("PATH"))
			b, err := cmd.Output()
			must(t, err)
			if got := strings.HasPrefix(string(b), thenMarker+"\n"); got != c.then {
				t.Fatalf("start in the stop's exec: %v, want %v: %q", got, c.then, b)
			}
			logged, _ := os.ReadFile(log)
			looks := strings.Count(string(logged), "0.1\n")
			if strings.Contains(string(logged), seconds(c.check)) {
				t.Fatalf("slept the whole stop_check at once: %q", logged)
			}
			if all := int(c.check / (100 * time.Millisecond)); c.then && (looks < 1 || looks >= all) || !c.then && looks != all {
				t.Fatalf("looked %d times within stop_check %s (the script's sleeps: %q)", looks, c.check, logged)
			}
		})
	}
}

// TestKnownRestartWaitsForItsStopInOneExec: a restart of the incarnation
// its host last saw, whose process takes a moment to go after its stop
// signal, still stops and starts in one exec: the op gives the exec the
// spec's stop_check to look for the process in.
func TestKnownRestartWaitsForItsStopInOneExec(t *testing.T) {
	me, err := user.Current()
	must(t, err)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "slow.pid")
	// A shell named as the spec's process, which ends 0.3 s after TERM,
	// as a process flushing its state would.
	shBin, err := exec.LookPath("sh")
	must(t, err)
	b, err := os.ReadFile(shBin)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "slow"), b, 0o755))
	slow := "./slow -c \"trap 'sleep 0.3; exit 0' TERM; while :; do sleep 1 & wait \\$!; done\" </dev/null >/dev/null 2>&1 & echo $! > slow.pid"
	t.Cleanup(func() { _ = exec.Command("sh", "-c", "kill -9 $(cat '"+pidFile+"') 2>/dev/null").Run() })
	runner := &recordingRunner{Runner: localRunner{}}
	a := oneHost(t, runner)
	spec := proc.Spec{ProcName: "slow", SetupPath: dir, PidPath: pidFile, Account: me.Username, AutoType: proc.AutoResident,
		StartCmd: slow, StopCmd: "kill $(cat slow.pid)",
		StartCheck: 100 * time.Millisecond, StopCheck: 10 * time.Second, OpTimeout: 30 * time.Second}
	run := func(op proc.OpType, known HostOpOutput) HostOpOutput {
		t.Helper()
		out, err := a.HostOp(context.Background(), HostOpInput{Op: op, Target: proc.Target{IP: "10.0.0.1"},
			Process: proc.ProcessID{Namespace: "gse", Name: "slow"}, Spec: spec, Pid: known.Pid, StartTicks: known.StartTicks})
		must(t, err)
		return out
	}
	known := run(proc.OpStart, HostOpOutput{})
	checkMessage(t, "start", known.Result, proc.CodeSuccess)
	runner.take()

	out := run(proc.OpRestart, known)
	checkMessage(t, "restart", out.Result, proc.CodeSuccess)
	if !out.Alive || out.Pid == 0 || out.Pid == known.Pid {
		t.Fatalf("restart: want a new live incarnation after pid %d, got %+v", known.Pid, out)
	}
	if outs := runner.take(); len(outs) != 1 || !strings.HasPrefix(outs[0], thenMarker+"\n") {
		t.Fatalf("restart: want the stop, its wait and the start in one exec, got %d: %q", len(outs), outs)
	}
}
