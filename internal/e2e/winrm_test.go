package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
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
		if now := time.Now().Unix(); inst.StartTime < now-120 || inst.StartTime > now+1 {
			t.Fatalf("%s: start time %d not recent", w.h.IP, inst.StartTime)
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
	if bat.OpenShells() != 0 || ps1.OpenShells() != 0 {
		t.Fatalf("open shells: %d, %d", bat.OpenShells(), ps1.OpenShells())
	}
}
