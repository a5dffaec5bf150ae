package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// installApp installs the test service as "svc" under /data/<dir>.
func installApp(t *testing.T, h *testbed.Host, dir string) { installNamedApp(t, h, dir, "svc") }

// installNamedApp installs a small service for control-op tests under
// /data/<dir>: the program <name> (a sh script that records reloads and
// writes its own pid file <name>.pid), and start.sh, stop.sh, restart.sh,
// reload.sh, kill.sh, version.sh and health.sh. Each start appends to
// starts.log; health.sh fails while the file "sick" exists.
func installNamedApp(t *testing.T, h *testbed.Host, dir, name string) {
	t.Helper()
	d := "/data/" + dir
	script := fmt.Sprintf(`set -e
mkdir -p %[1]s
cat > %[1]s/%[2]s <<'EOS'
#!/bin/sh
trap 'echo reload >> %[1]s/events' HUP
trap 'exit 0' TERM
echo $$ > %[1]s/%[2]s.pid
while :; do sleep 1 & wait $!; done
EOS
cat > %[1]s/start.sh <<'EOS'
#!/bin/sh
cd %[1]s
echo start >> %[1]s/starts.log
setsid ./%[2]s </dev/null >/dev/null 2>&1 &
sleep 0.2
EOS
cat > %[1]s/stop.sh <<'EOS'
#!/bin/sh
kill "$(cat %[1]s/%[2]s.pid)"
EOS
cat > %[1]s/restart.sh <<'EOS'
#!/bin/sh
kill "$(cat %[1]s/%[2]s.pid)"; sleep 0.5; exec %[1]s/start.sh
EOS
cat > %[1]s/reload.sh <<'EOS'
#!/bin/sh
kill -HUP "$(cat %[1]s/%[2]s.pid)"
EOS
cat > %[1]s/kill.sh <<'EOS'
#!/bin/sh
kill -9 "$(cat %[1]s/%[2]s.pid)"
EOS
printf '#!/bin/sh\necho 1.2.3\n' > %[1]s/version.sh
printf '#!/bin/sh\n[ ! -e %[1]s/sick ]\n' > %[1]s/health.sh
chmod +x %[1]s/*.sh %[1]s/%[2]s
`, d, name)
	if _, err := h.Exec(script); err != nil {
		t.Fatalf("install app on %s: %v", h.IP, err)
	}
}

// appSpec is the spec of the app installed under /data/<dir>.
func appSpec(dir string) proc.Spec {
	d := "/data/" + dir
	return proc.Spec{
		ProcName: "svc", SetupPath: d, PidPath: d + "/svc.pid",
		StartCmd: "./start.sh", StopCmd: "./stop.sh", ReloadCmd: "./reload.sh",
		AutoType: proc.AutoResident, StartCheck: time.Second, StopCheck: 3 * time.Second,
		OpTimeout: 20 * time.Second,
	}
}

// op runs one op on one item and returns its result.
func (e *env) op(op proc.OpType, it proc.Item) proc.HostResult {
	e.t.Helper()
	res := e.runOperate(workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: op, Items: []proc.Item{it}})
	if len(res.Results) != 1 {
		e.t.Fatalf("want one result, got %+v", res)
	}
	e.recordHistory(res.TaskID, "operate-"+op.String())
	return res.Results[0].HostResult
}

func wantCode(t *testing.T, what string, r proc.HostResult, code proc.Code) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("%s: code %d (%s), want %d", what, r.Code, r.Message, code)
	}
}

// hostPid reads a pid file on the host, 0 when absent.
func hostPid(t *testing.T, h *testbed.Host, path string) int {
	t.Helper()
	out, _ := h.Exec("cat " + path + " 2>/dev/null || true")
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n
}

// hostAlive reports whether pid runs on the host; a zombie waiting for its
// reaper does not count.
func hostAlive(h *testbed.Host, pid int) bool {
	out, err := h.Exec(fmt.Sprintf("s=$(cat /proc/%d/stat 2>/dev/null) && set -- ${s##*) } && echo $1", pid))
	st := strings.TrimSpace(out)
	return err == nil && st != "" && st != "Z"
}

func statusPid(t *testing.T, r proc.HostResult) (pid int, isAuto bool) {
	t.Helper()
	var c struct {
		Process []struct {
			Instance []struct {
				Pid    int  `json:"pid"`
				IsAuto bool `json:"isAuto"`
			} `json:"instance"`
		} `json:"process"`
	}
	if err := jsonUnmarshal(r.Content, &c); err != nil || len(c.Process) != 1 || len(c.Process[0].Instance) != 1 {
		t.Fatalf("status content %q: %v", r.Content, err)
	}
	return c.Process[0].Instance[0].Pid, c.Process[0].Instance[0].IsAuto
}

func TestControlOpsOnOneHost(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	e.startWorker()
	spec := appSpec("app")
	it := proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "1", Name: "svc"}, Spec: &spec}
	registered := it
	registered.Spec = nil

	// Status only reads: an inline spec is probed, not registered.
	wantCode(t, "status before start", e.op(proc.OpStatus, it), proc.CodeNotRunning)
	wantCode(t, "status of the unregistered", e.op(proc.OpStatus, registered), proc.CodeNotRegistered)
	// A control op with an inline spec registers it, then acts.
	r := e.op(proc.OpStart, it)
	wantCode(t, "start", r, proc.CodeSuccess)
	pid := hostPid(t, h, "/data/app/svc.pid")
	if pid == 0 || !hostAlive(h, pid) {
		t.Fatalf("start left no live process (pid %d)", pid)
	}
	st := e.op(proc.OpStatus, registered)
	wantCode(t, "status after start", st, proc.CodeSuccess)
	if got, auto := statusPid(t, st); got != pid || !auto {
		t.Fatalf("status pid %d auto %v, want pid %d managed", got, auto, pid)
	}
	r = e.op(proc.OpStart, registered)
	wantCode(t, "second start", r, proc.CodeAlreadyRunning)

	wantCode(t, "reload", e.op(proc.OpReload, registered), proc.CodeSuccess)
	if out, _ := h.Exec("cat /data/app/events"); !strings.Contains(out, "reload") {
		t.Fatalf("reload_cmd did not reach the process: %q", out)
	}
	if got := hostPid(t, h, "/data/app/svc.pid"); got != pid {
		t.Fatalf("reload changed the pid %d -> %d", pid, got)
	}

	wantCode(t, "restart", e.op(proc.OpRestart, registered), proc.CodeSuccess)
	newPid := hostPid(t, h, "/data/app/svc.pid")
	if newPid == pid || hostAlive(h, pid) || !hostAlive(h, newPid) {
		t.Fatalf("restart: old pid %d alive=%v, new pid %d alive=%v", pid, hostAlive(h, pid), newPid, hostAlive(h, newPid))
	}

	wantCode(t, "unregister as managed", e.op(proc.OpUnregister, registered), proc.CodeSuccess)
	if _, auto := statusPid(t, e.op(proc.OpStatus, registered)); auto {
		t.Fatal("op_type 4 must unmanage")
	}
	wantCode(t, "register as managed", e.op(proc.OpRegister, registered), proc.CodeSuccess)
	if _, auto := statusPid(t, e.op(proc.OpStatus, registered)); !auto {
		t.Fatal("op_type 3 must manage")
	}

	r = e.op(proc.OpStop, registered)
	wantCode(t, "stop", r, proc.CodeSuccess)
	if hostAlive(h, newPid) {
		t.Fatal("stop left the process alive")
	}
	r = e.op(proc.OpStop, registered)
	wantCode(t, "second stop", r, proc.CodeNotRunning)
	if r.Message != "no need to stop the process(svc) that is not running" {
		t.Fatalf("second stop message %q", r.Message)
	}
	st = e.op(proc.OpStatus, registered)
	wantCode(t, "status after stop", st, proc.CodeNotRunning)
	if got, auto := statusPid(t, st); got != -1 || auto {
		t.Fatalf("after stop: pid %d auto %v", got, auto)
	}

	wantCode(t, "start for kill", e.op(proc.OpStart, registered), proc.CodeSuccess)
	pid = hostPid(t, h, "/data/app/svc.pid")
	wantCode(t, "kill", e.op(proc.OpKill, registered), proc.CodeSuccess)
	if hostAlive(h, pid) {
		t.Fatal("kill left the process alive")
	}
	if out, _ := h.Exec("grep -c start /data/app/starts.log"); strings.TrimSpace(out) != "3" {
		t.Fatalf("start_cmd ran %s times, want 3", strings.TrimSpace(out))
	}

	wantCode(t, "unknown op_type", e.op(proc.OpType(5), registered), proc.CodeBadOpType)
	e.recordHistory(workflows.HostWorkflowID(proc.HostID{IP: h.IP}), "host")
	other := registered
	other.Process.Name = "never-registered"
	wantCode(t, "unregistered process", e.op(proc.OpStatus, other), proc.CodeNotRegistered)
}

func TestControlOpFailures(t *testing.T) {
	// Beside the suite's other parallel tests: it mostly waits on failing ops' checks and timeouts.
	t.Parallel()
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	e.startWorker()
	item := func(name string, edit func(*proc.Spec)) proc.Item {
		s := appSpec("app")
		s.ValueKey = name
		edit(&s)
		return proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "1", Name: name}, Spec: &s}
	}
	r := e.op(proc.OpStart, item("fails", func(s *proc.Spec) { s.StartCmd = "echo boom >&2; exit 3" }))
	wantCode(t, "failing start_cmd", r, proc.CodeCommandFailed)
	if !strings.Contains(r.Message, "boom") {
		t.Fatalf("65535 must carry the command's output: %q", r.Message)
	}
	r = e.op(proc.OpStart, item("dies", func(s *proc.Spec) { s.StartCmd = "true"; s.PidPath = "/data/app/none.pid" }))
	wantCode(t, "start that starts nothing", r, proc.CodePostCheck)
	if !strings.Contains(r.Message, "start process (svc) failed, for post-check status not alive") {
		t.Fatalf("836 message %q", r.Message)
	}
	r = e.op(proc.OpStart, item("once", func(s *proc.Spec) {
		s.StartCmd = "echo ran > /data/app/oneshot"
		s.PidPath = "/data/app/oneshot.pid"
		s.AutoType = proc.AutoOneShot
	}))
	wantCode(t, "one-shot start", r, proc.CodeSuccess)
	if out, _ := h.Exec("cat /data/app/oneshot"); strings.TrimSpace(out) != "ran" {
		t.Fatalf("one-shot did not run: %q", out)
	}
	r = e.op(proc.OpStart, item("slow", func(s *proc.Spec) {
		s.StartCmd = "sleep 29.731"
		s.OpTimeout = 2 * time.Second
	}))
	wantCode(t, "start past op_timeout", r, proc.CodeTimeout)
	if out, _ := h.Exec("pgrep -f 'slee[p] 29.731' || true"); strings.TrimSpace(out) != "" {
		t.Fatalf("the timed-out start_cmd is still running: %s", out)
	}

	// A stop_cmd that does not stop anything: still alive after the check.
	stubborn := item("stubborn", func(s *proc.Spec) { s.StopCmd = "true"; s.StopCheck = time.Second })
	wantCode(t, "start stubborn", e.op(proc.OpStart, stubborn), proc.CodeSuccess)
	r = e.op(proc.OpStop, stubborn)
	wantCode(t, "stop that does not stop", r, proc.CodePostCheck)
	// Without a stop_cmd drover signals the process group.
	bare := item("stubborn", func(s *proc.Spec) { s.StopCmd = ""; s.ReloadCmd = "" })
	wantCode(t, "stop by signal", e.op(proc.OpStop, bare), proc.CodeSuccess)
	if pid := hostPid(t, h, "/data/app/svc.pid"); hostAlive(h, pid) {
		t.Fatal("TERM to the process group left it alive")
	}
	wantCode(t, "ps1 on an ssh host", e.op(proc.OpStart, item("win", func(s *proc.Spec) { s.ShellExt = proc.ShellPS1 })), proc.CodeBadSpec)

	// Stop and kill are judged by the outcome: a script that stops the
	// process and then exits 1 (real ones do) answers 0, and says so.
	exits1 := item("exits1", func(s *proc.Spec) {
		s.StopCmd = "./stop.sh; echo already gone >&2; exit 1"
		s.KillCmd = "./kill.sh; exit 1"
		s.StopCheck = time.Second
	})
	for _, op := range []proc.OpType{proc.OpStop, proc.OpKill} {
		wantCode(t, "start exits1", e.op(proc.OpStart, exits1), proc.CodeSuccess)
		pid := hostPid(t, h, "/data/app/svc.pid")
		r = e.op(op, exits1)
		wantCode(t, op.String()+" whose command exits 1 after the process is gone", r, proc.CodeSuccess)
		if !strings.Contains(r.Message, "command exited 1") || hostAlive(h, pid) {
			t.Fatalf("%v: message %q (must say how the command exited); pid %d alive %v", op, r.Message, pid, hostAlive(h, pid))
		}
	}
	// A command that exits 1 and leaves the process alive stays 836.
	fails := item("exits1", func(s *proc.Spec) { s.StopCmd = "exit 1"; s.StopCheck = time.Second })
	wantCode(t, "start again", e.op(proc.OpStart, fails), proc.CodeSuccess)
	r = e.op(proc.OpStop, fails)
	wantCode(t, "stop whose command exits 1 and stops nothing", r, proc.CodePostCheck)
	if !strings.Contains(r.Message, "stop command exited 1") {
		t.Fatalf("836 must say how the command exited: %q", r.Message)
	}
	wantCode(t, "clean up", e.op(proc.OpKill, item("exits1", func(s *proc.Spec) {})), proc.CodeSuccess)
	// A restart by the job platform's convention where setup_path is missing.
	r = e.op(proc.OpRestart, item("nodir", func(s *proc.Spec) {
		s.SetupPath, s.PidPath = "/data/gse", "/data/gse/svc.pid"
		s.StartCmd, s.StopCmd, s.ReloadCmd = "", "", ""
	}))
	wantCode(t, "restart in a missing setup_path", r, proc.CodeBadSpec)
	if r.Message != "setup_path /data/gse does not exist on this host" {
		t.Fatalf("missing setup_path message %q", r.Message)
	}
}

func TestRegistryOps(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	e.startWorker()
	spec := appSpec("app")
	it := proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "gse", Name: "svc"}, Spec: &spec}
	wantCode(t, "register", e.op(proc.OpSpecRegister, it), proc.CodeSuccess)
	wantCode(t, "register again", e.op(proc.OpSpecRegister, it), proc.CodeAlreadyExists)
	clash := it
	clash.Process.Name = "svc-copy"
	wantCode(t, "same value_key under another name", e.op(proc.OpSpecRegister, clash), proc.CodeBadSpec)
	wantCode(t, "update", e.op(proc.OpSpecUpdate, it), proc.CodeSuccess)
	wantCode(t, "unregister", e.op(proc.OpSpecUnregister, it), proc.CodeSuccess)
	wantCode(t, "unregister again", e.op(proc.OpSpecUnregister, it), proc.CodeNotRunning)
	// GSE 2.0 callers register through update: an update of what is not
	// registered registers it.
	wantCode(t, "update unknown", e.op(proc.OpSpecUpdate, it), proc.CodeSuccess)
	wantCode(t, "register after an update registered it", e.op(proc.OpSpecRegister, it), proc.CodeAlreadyExists)

	// The registry lives in the host's workflow: it outlives the worker.
	wantCode(t, "unregister before restart", e.op(proc.OpSpecUnregister, it), proc.CodeSuccess)
	wantCode(t, "register before restart", e.op(proc.OpSpecRegister, it), proc.CodeSuccess)
	e.worker.Stop()
	e.startWorker()
	// A query right after the restart may wait on the stopped worker's
	// sticky queue; the engine asks again until the new worker answers.
	var entries []workflows.Entry
	if err := engine.Query(context.Background(), e.client, workflows.HostWorkflowID(proc.HostID{IP: h.IP}), workflows.RegistryQuery, &entries); err != nil {
		t.Fatalf("registry query after worker restart: %v", err)
	}
	if len(entries) != 1 || entries[0].Spec.PidPath != spec.PidPath {
		t.Fatalf("registry after worker restart: %+v", entries)
	}
}
