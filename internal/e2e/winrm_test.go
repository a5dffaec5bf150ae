package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// These tests put WinRM protocol test doubles (testbed.WinHost) next to
// real sshd hosts in one inventory. The doubles speak real WS-Management
// to drover's WinRM transport; what they cannot prove is how real
// PowerShell and cmd.exe run drover's scripts.

const winPwEnv = "DROVER_E2E_WINRM_PW"

// newWinEnv starts sshHosts sshd hosts and one WinRM double per option, and
// writes an inventory holding all of them. edit may change a double's
// inventory entry.
func newWinEnv(t *testing.T, sshHosts int, edit func(i int, entry map[string]any), opts ...testbed.WinOptions) (*env, []*testbed.WinHost) {
	t.Helper()
	e := newEnv(t, sshHosts)
	var hosts []map[string]any
	for _, h := range e.bed.Hosts {
		hosts = append(hosts, map[string]any{"ip": h.IP, "bk_cloud_id": 0, "address": h.IP, "port": h.Port})
	}
	var wins []*testbed.WinHost
	for i, o := range opts {
		w := testbed.NewWinHost(t, o)
		t.Setenv(winPwEnv, w.Password)
		entry := map[string]any{"ip": w.IP, "bk_cloud_id": 0, "transport": "winrm", "port": w.Port,
			"user": w.User, "password_env": winPwEnv}
		if w.HTTPS {
			entry["https"], entry["ca_file"] = true, w.CAFile
		}
		if edit != nil {
			edit(i, entry)
		}
		hosts = append(hosts, entry)
		wins = append(wins, w)
	}
	e.writeInventory(hosts, nil)
	return e, wins
}

// installWinApp writes the control scripts of a service "svc" under dir on
// a double, in the double's line language (see testbed/winhost.go): each
// start appends to starts.log's count by spawning svc.exe with its pid file.
func installWinApp(w *testbed.WinHost, dir, ext string) {
	arg := "%1"
	if ext == "ps1" {
		arg = "$args[0]"
	}
	w.WriteFile(dir+`\svc.exe`, "MZ")
	w.WriteFile(dir+`\start.`+ext, "@echo off\r\nspawn svc.exe svc.pid\r\necho started "+arg+"\r\n")
	w.WriteFile(dir+`\stop.`+ext, "stop svc.pid\r\n")
	w.WriteFile(dir+`\restart.`+ext, "stop svc.pid\r\nspawn svc.exe svc.pid\r\n")
	w.WriteFile(dir+`\reload.`+ext, "echo reloaded "+arg+"\r\n")
	w.WriteFile(dir+`\kill.`+ext, "stop svc.pid\r\n")
}

// winSpec is a resident svc under dir, run by the job platform's default
// commands (`DIR\start.bat svc`) unless the caller adds its own.
func winSpec(dir string, ext proc.ShellExt) proc.Spec {
	return proc.Spec{ProcName: "svc", SetupPath: dir, PidPath: dir + `\svc.pid`, ShellExt: ext,
		AutoType: proc.AutoResident, StartCheck: time.Second, StopCheck: 2 * time.Second, OpTimeout: 20 * time.Second}
}

// operateRequest is an operate_process request (seed 000) for op on ips.
func operateRequest(op proc.OpType, ns, name string, ips ...string) string {
	var hs []map[string]any
	for _, ip := range ips {
		hs = append(hs, map[string]any{"ip": ip, "bk_cloud_id": 0, "bk_supplier_id": 0})
	}
	b, _ := json.Marshal(map[string]any{"bk_app_code": "e2e", "bk_username": "tester",
		"meta": map[string]any{"namespace": ns, "name": name}, "op_type": int(op), "hosts": hs})
	return string(b)
}

func TestWinRMOpsNextToSSH(t *testing.T) {
	e, wins := newWinEnv(t, 1, nil, testbed.WinOptions{}, testbed.WinOptions{HTTPS: true})
	ssh, bat, ps1 := e.bed.Hosts[0], wins[0], wins[1]
	installApp(t, ssh, "app")
	const batDir, ps1Dir = `C:\apps\app`, `C:\Program Files\app`
	installWinApp(bat, batDir, "bat")
	installWinApp(ps1, ps1Dir, "ps1")
	e.startWorker()

	// The bat host runs the job platform's defaults for every verb; the
	// ps1 host only has a start_cmd, so it is stopped and killed by pid.
	sh := appSpec("app")
	sh.StartCheck, sh.StopCheck = time.Second, 2*time.Second
	e.register("win", "svc", sh, proc.Target{IP: ssh.IP})
	e.register("win", "svc", winSpec(batDir, proc.ShellBat), proc.Target{IP: bat.IP})
	ps1Spec := winSpec(ps1Dir, proc.ShellPS1)
	ps1Spec.StartCmd = `& 'C:\Program Files\app\start.ps1' svc`
	e.register("win", "svc", ps1Spec, proc.Target{IP: ps1.IP})

	ips := []string{ssh.IP, bat.IP, ps1.IP}
	run := func(op proc.OpType, want proc.Code) resultResponse {
		t.Helper()
		out, errOut, code := e.starter(operateRequest(op, "win", "svc", ips...), "api", "operate_process", "-f", "-", "--wait")
		r := decodeResult(t, out)
		if !r.Result || len(r.Data) != 3 {
			t.Fatalf("%s: exit %d\n%s%s", op, code, out, errOut)
		}
		for _, ip := range ips {
			if got := r.Data[key(ip, "win", "svc")]; got.ErrorCode != int(want) {
				t.Fatalf("%s on %s: %d %q, want %d", op, ip, got.ErrorCode, got.ErrorMsg, want)
			}
		}
		return r
	}
	winPid := func(w *testbed.WinHost, dir string) int { return w.PidIn(dir + `\svc.pid`) }

	run(proc.OpStart, proc.CodeSuccess)
	if winPid(bat, batDir) == 0 || winPid(ps1, ps1Dir) == 0 {
		t.Fatalf("start left no live process: %+v %+v", bat.Processes(), ps1.Processes())
	}
	r := run(proc.OpStatus, proc.CodeSuccess)
	for _, w := range []struct {
		h   *testbed.WinHost
		dir string
	}{{bat, batDir}, {ps1, ps1Dir}} {
		c := decodeStatus(t, r.Data[key(w.h.IP, "win", "svc")].Content)
		inst := c.Process[0].Instance[0]
		if c.IP != w.h.IP || inst.Pid != winPid(w.h, w.dir) || inst.UsePhyMem != 24<<20 || inst.PhyMemUsage <= 0 ||
			inst.CPUUsage <= 0 || inst.ThreadCount != 6 || !strings.Contains(inst.Cmdline, `svc.exe`) {
			t.Fatalf("%s: status %+v", w.h.IP, c)
		}
		if now := time.Now().Unix(); startUnix(t, inst.StartTime) < now-120 || startUnix(t, inst.StartTime) > now+1 {
			t.Fatalf("%s: start time %s not recent", w.h.IP, inst.StartTime)
		}
	}
	// The same shape as the sshd host's.
	if c := decodeStatus(t, r.Data[key(ssh.IP, "win", "svc")].Content); c.Process[0].Instance[0].Pid <= 0 {
		t.Fatalf("ssh status %+v", c)
	}
	run(proc.OpStart, proc.CodeAlreadyRunning)

	before := []int{winPid(bat, batDir), winPid(ps1, ps1Dir)}
	run(proc.OpRestart, proc.CodeSuccess)
	if after := []int{winPid(bat, batDir), winPid(ps1, ps1Dir)}; after[0] == 0 || after[1] == 0 || after[0] == before[0] || after[1] == before[1] {
		t.Fatalf("restart: pids %v -> %v", before, after)
	}
	run(proc.OpKill, proc.CodeSuccess)
	if len(bat.Processes()) != 0 || len(ps1.Processes()) != 0 {
		t.Fatalf("kill left processes: %+v %+v", bat.Processes(), ps1.Processes())
	}
	r = run(proc.OpStatus, proc.CodeNotRunning)
	for _, ip := range ips {
		if got := r.Data[key(ip, "win", "svc")]; got.ErrorMsg != "process(svc) is not running" || decodeStatus(t, got.Content).Process[0].Instance[0].Pid != -1 {
			t.Fatalf("%s: %+v", ip, got)
		}
	}
	run(proc.OpStart, proc.CodeSuccess)
	run(proc.OpStop, proc.CodeSuccess)
	if len(bat.Processes()) != 0 || len(ps1.Processes()) != 0 {
		t.Fatalf("stop left processes: %+v %+v", bat.Processes(), ps1.Processes())
	}
	run(proc.OpStop, proc.CodeNotRunning)

	// A failing bat command answers 65535 with its output, as on Linux.
	bat.WriteFile(batDir+`\start.bat`, "echo cannot bind port 80\r\nexit 3\r\n")
	out, _, _ := e.starter(operateRequest(proc.OpStart, "win", "svc", bat.IP), "api", "operate_process", "-f", "-", "--wait")
	if got := decodeResult(t, out).Data[key(bat.IP, "win", "svc")]; got.ErrorCode != int(proc.CodeCommandFailed) ||
		!strings.Contains(got.ErrorMsg, "start command exited 3: cannot bind port 80") {
		t.Fatalf("failing start.bat: %+v", got)
	}
	// sh cannot run on a WinRM host, as bat cannot on an sshd host.
	shSpec := appSpec("app")
	got := e.op(proc.OpStatus, proc.Item{Target: proc.Target{IP: bat.IP}, Process: proc.ProcessID{Namespace: "win", Name: "other"}, Spec: &shSpec})
	if got.Code != proc.CodeBadSpec || !strings.Contains(got.Message, "cannot run on a Windows (winrm) host") {
		t.Fatalf("sh to a winrm host: %+v", got)
	}
	// The WinRM login is the account: another account has no credentials.
	other := winSpec(batDir, proc.ShellBat)
	other.Account = "svc-other"
	got = e.op(proc.OpStatus, proc.Item{Target: proc.Target{IP: bat.IP}, Process: proc.ProcessID{Namespace: "win", Name: "other"}, Spec: &other})
	if got.Code != proc.CodeAuthFailed || !strings.Contains(got.Message, `no WinRM credentials for account "svc-other"`) {
		t.Fatalf("account without credentials: %+v", got)
	}
	// The supervision watch probes every second: a shell its probe holds
	// closes when the probe ends; a leaked one never does.
	for _, w := range []*testbed.WinHost{bat, ps1} {
		deadline := time.Now().Add(10 * time.Second)
		for w.OpenShells() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d shells still open", w.IP, w.OpenShells())
			}
			time.Sleep(10 * time.Millisecond) // polling the double
		}
	}
}

func TestWinRMFailuresStayPerHost(t *testing.T) {
	otherCA := t.TempDir() + "/other-ca.pem"
	if err := testbed.WriteOtherCA(otherCA); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DROVER_E2E_WRONG_PW", "not-the-password")
	// 0 healthy (https), 1 https with a CA that did not sign its
	// certificate, 2 a wrong password, 3 hangs on every command.
	e, wins := newWinEnv(t, 1, func(i int, entry map[string]any) {
		switch i {
		case 1:
			entry["ca_file"] = otherCA
		case 2:
			entry["password_env"] = "DROVER_E2E_WRONG_PW"
		}
	}, testbed.WinOptions{HTTPS: true}, testbed.WinOptions{HTTPS: true}, testbed.WinOptions{}, testbed.WinOptions{})
	ssh := e.bed.Hosts[0]
	if _, err := ssh.StartSample("gse", "svc", ""); err != nil {
		t.Fatal(err)
	}
	const dir = `C:\apps\app`
	for _, w := range wins {
		installWinApp(w, dir, "bat")
		w.WriteFile(dir+`\start.bat`, "spawn svc.exe svc.pid\r\n")
	}
	e.startWorker()
	opTimeout := 3 * time.Second
	sshSpec := sampleSpec("gse", "svc")
	sshSpec.OpTimeout = opTimeout
	e.register("gse", "svc", sshSpec, proc.Target{IP: ssh.IP})
	spec := winSpec(dir, proc.ShellBat)
	spec.OpTimeout = opTimeout
	for _, w := range wins {
		e.register("gse", "svc", spec, proc.Target{IP: w.IP})
	}
	// The healthy and the hung double run the process, unmanaged.
	for _, i := range []int{0, 3} {
		wins[i].Spawn(dir+`\svc.exe`, dir+`\svc.pid`)
	}
	wins[3].Hang(true)

	ips := []string{ssh.IP, wins[0].IP, wins[1].IP, wins[2].IP, wins[3].IP}
	began := time.Now()
	out, errOut, code := e.starter(operateRequest(proc.OpStatus, "gse", "svc", ips...), "api", "operate_process", "-f", "-", "--wait")
	took := time.Since(began)
	if code != cli.ExitHostsFailed {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	r := decodeResult(t, out)
	want := map[string]proc.Code{ssh.IP: proc.CodeSuccess, wins[0].IP: proc.CodeSuccess, wins[1].IP: proc.CodeHostKey,
		wins[2].IP: proc.CodeAuthFailed, wins[3].IP: proc.CodeTimeout}
	for ip, c := range want {
		if got := r.Data[key(ip, "gse", "svc")]; got.ErrorCode != int(c) {
			t.Errorf("%s: %d %q, want %d", ip, got.ErrorCode, got.ErrorMsg, c)
		}
	}
	if msg := r.Data[key(wins[1].IP, "gse", "svc")].ErrorMsg; !strings.Contains(msg, "TLS certificate not verified against ca_file "+otherCA) {
		t.Errorf("wrong CA message: %s", msg)
	}
	if msg := r.Data[key(wins[2].IP, "gse", "svc")].ErrorMsg; !strings.Contains(msg, "HTTP 401") {
		t.Errorf("wrong password message: %s", msg)
	}
	// The transport ended the hung command at op_timeout, not the
	// activity's own deadline; the batch is bounded as for sshd hosts.
	if msg := r.Data[key(wins[3].IP, "gse", "svc")].ErrorMsg; !strings.Contains(msg, "command ran past its 3s timeout") || !strings.Contains(msg, "remote command terminated") {
		t.Errorf("hung host message: %s", msg)
	}
	t.Logf("batch with a hung WinRM host (op_timeout %s) took %s", opTimeout, took.Round(time.Millisecond))
	if took > policies.DefaultOpTimeout {
		t.Fatalf("the batch took %s, longer than the default op timeout %s", took, policies.DefaultOpTimeout)
	}
	// Refused before any credentials went out; refused once, not retried.
	if st := wins[1].Stats(); st.ShellsCreated != 0 || st.AuthFailures != 0 {
		t.Errorf("host behind an unverified certificate got requests: %+v", st)
	}
	if st := wins[2].Stats(); st.AuthFailures != 1 || st.ShellsCreated != 0 {
		t.Errorf("wrong password: %+v, want exactly one refused request", st)
	}
	// The hung command was terminated and its shell deleted.
	if st := wins[3].Stats(); st.Signals == 0 || wins[3].OpenShells() != 0 {
		t.Errorf("hung host: %+v, %d shells open", st, wins[3].OpenShells())
	}
}

func TestWinRMShellsClosedAfter100Ops(t *testing.T) {
	e, wins := newWinEnv(t, 1, nil, testbed.WinOptions{})
	w := wins[0]
	e.startWorker()
	// 25 processes on the host, each started, probed, killed and probed:
	// 100 ops in four requests.
	const n = 25
	items := make([]proc.Item, n)
	for i := range items {
		dir := fmt.Sprintf(`C:\apps\app%02d`, i)
		installWinApp(w, dir, "bat")
		spec := winSpec(dir, proc.ShellBat)
		spec.StartCheck, spec.StopCheck = 100*time.Millisecond, 100*time.Millisecond
		items[i] = proc.Item{Target: proc.Target{IP: w.IP}, Process: proc.ProcessID{Namespace: "many", Name: fmt.Sprintf("svc%02d", i)}, Spec: &spec}
	}
	began := time.Now()
	for _, o := range []struct {
		op   proc.OpType
		want proc.Code
	}{{proc.OpStart, proc.CodeSuccess}, {proc.OpStatus, proc.CodeSuccess}, {proc.OpKill, proc.CodeSuccess}, {proc.OpStatus, proc.CodeNotRunning}} {
		res := e.runOperate(workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: o.op, Items: items})
		if len(res.Results) != n {
			t.Fatalf("%s: %d results", o.op, len(res.Results))
		}
		for _, r := range res.Results {
			if r.Code != o.want {
				t.Fatalf("%s %s: %d %q, want %d", o.op, r.Key, r.Code, r.Message, o.want)
			}
		}
	}
	took := time.Since(began)
	// Each start manages its process and each kill unmanages it: a
	// supervision poll may still be in flight when the last op returns,
	// and is cancelled with its shell deleted.
	settled := waitFor(t, 10*time.Second, "no open shells after the run", func() bool { return w.OpenShells() == 0 })
	st := w.Stats()
	t.Logf("100 ops in %s (%.1f ops/s, %d WinRM commands); shells created %d, deleted %d, open %d (%s after the last op)",
		took.Round(time.Millisecond), 100/took.Seconds(), st.Commands, st.ShellsCreated, st.ShellsDeleted, w.OpenShells(), settled.Round(time.Millisecond))
	if st.ShellsCreated != st.ShellsDeleted || st.ShellsCreated < 100 || len(w.Processes()) != 0 {
		t.Fatalf("after 100 ops: %+v, processes %+v", st, w.Processes())
	}
}

func TestWinRMSuperviseRestartsAKilledProcess(t *testing.T) {
	e, wins := newWinEnv(t, 1, nil, testbed.WinOptions{HTTPS: true})
	w := wins[0]
	const dir = `C:\apps\app`
	installWinApp(w, dir, "ps1")
	e.startWorker()
	// A poll clock: a second supervised process whose health_cmd spawns a
	// beat process at every poll of the host, so the test can wait for
	// polls to happen instead of for time to pass.
	const clockDir = `C:\apps\clock`
	installWinApp(w, clockDir, "ps1")
	w.WriteFile(clockDir+`\beat.exe`, "MZ")
	clockSpec := winSpec(clockDir, proc.ShellPS1)
	clockSpec.HealthCmd = "spawn beat.exe beat.pid"
	clock := proc.Item{Target: proc.Target{IP: w.IP}, Process: proc.ProcessID{Namespace: "clock", Name: "svc"}, Spec: &clockSpec}
	wantCode(t, "start the poll clock", e.op(proc.OpStart, clock), proc.CodeSuccess)
	beats := func() int {
		n := 0
		for _, p := range w.Processes() {
			if p.Exe == clockDir+`\beat.exe` {
				n++
			}
		}
		return n
	}
	spec := winSpec(dir, proc.ShellPS1)
	spec.StartRetries, spec.StartInterval = 2, time.Second
	it := proc.Item{Target: proc.Target{IP: w.IP}, Process: proc.ProcessID{Namespace: "sup", Name: "svc"}, Spec: &spec}
	wantCode(t, "start managed", e.op(proc.OpStart, it), proc.CodeSuccess)
	pid := w.PidIn(dir + `\svc.pid`)
	if pid == 0 || !w.KillProcess(pid) {
		t.Fatalf("no live process to kill: %+v", w.Processes())
	}
	took := waitFor(t, 15*time.Second, "restart after the process died", func() bool {
		p := w.PidIn(dir + `\svc.pid`)
		return p != 0 && p != pid
	})
	t.Logf("killed to a new live pid on the WinRM host: %s", took.Round(time.Millisecond))
	waitFor(t, 10*time.Second, "restart event", func() bool {
		return countKind(e.winEvents(t, w), workflows.EventRestartSuccess) > 0
	})
	// Operators win: a stop ends supervision, nothing comes back.
	it.Spec = nil
	wantCode(t, "stop", e.op(proc.OpStop, it), proc.CodeSuccess)
	// Two more polls: whatever supervision decided on the first was
	// carried out before the second, both riding the host's workflow.
	from := beats()
	waitFor(t, 30*time.Second, "two more supervision polls", func() bool { return beats() >= from+2 })
	for _, p := range w.Processes() {
		if p.Exe == dir+`\svc.exe` {
			t.Fatalf("after stop: %+v came back", p)
		}
	}
	// With the clock stopped too, nothing is left managed; a poll still
	// in flight is cancelled with its shell deleted.
	clock.Spec = nil
	wantCode(t, "stop the poll clock", e.op(proc.OpStop, clock), proc.CodeSuccess)
	waitFor(t, 10*time.Second, "no open shells after the stops", func() bool { return w.OpenShells() == 0 })
}

// winEvents is the supervision events of a double's host workflow.
func (e *env) winEvents(t *testing.T, w *testbed.WinHost) []workflows.Event {
	t.Helper()
	return e.hostEvents(t, proc.HostID{IP: w.IP})
}
