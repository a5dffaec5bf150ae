package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

func key(ip, ns, name string) string { return "0:0:" + ip + ":" + ns + ":" + name }

func TestStatusRunningAndStalePid(t *testing.T) {
	e := newEnv(t, 3)
	e.startWorker()
	h := e.bed.Hosts
	pids := map[string]int{}
	for _, host := range h[:2] {
		pid, err := host.StartSample("gse", "proc-test", "")
		if err != nil {
			t.Fatal(err)
		}
		pids[host.IP] = pid
	}
	e.register("gse", "proc-test", sampleSpec("gse", "proc-test"), proc.Target{IP: h[0].IP}, proc.Target{IP: h[1].IP}, proc.Target{IP: h[2].IP})
	// Host 2's pid file names a live pid of another program.
	if _, err := h[2].Exec(`mkdir -p /data/gse; setsid sleep 3600 </dev/null >/dev/null 2>&1 & echo $! > /data/gse/proc-test.pid`); err != nil {
		t.Fatal(err)
	}

	req := statusRequest("gse", "proc-test", [2]any{0, h[0].IP}, [2]any{0, h[1].IP}, [2]any{0, h[2].IP})
	out, errOut, code := e.starter(req, "api", "operate_process", "-f", "-", "--wait")
	if code != cli.ExitHostsFailed {
		t.Fatalf("exit %d, want %d (one host not running)\n%s%s", code, cli.ExitHostsFailed, out, errOut)
	}
	r := decodeResult(t, out)
	if !r.Result || r.Code != 0 || len(r.Data) != 3 {
		t.Fatalf("response %+v", r)
	}
	for _, host := range h[:2] {
		res := r.Data[key(host.IP, "gse", "proc-test")]
		if res.ErrorCode != 0 || res.ErrorMsg != "success" {
			t.Fatalf("%s: %+v", host.IP, res)
		}
		c := decodeStatus(t, res.Content)
		inst := c.Process[0].Instance[0]
		if c.IP != host.IP || c.Process[0].ProcName != "proc-test" || inst.Pid != pids[host.IP] {
			t.Fatalf("%s: content %+v, want pid %d", host.IP, c, pids[host.IP])
		}
		if inst.UsePhyMem == 0 || inst.PhyMemUsage <= 0 || inst.CPUUsage < 0 || inst.ThreadCount < 1 {
			t.Fatalf("%s: resource usage missing: %+v", host.IP, inst)
		}
		if now := time.Now().Unix(); startUnix(t, inst.StartTime) < now-300 || startUnix(t, inst.StartTime) > now+1 {
			t.Fatalf("%s: start time %s not recent", host.IP, inst.StartTime)
		}
	}
	stale := r.Data[key(h[2].IP, "gse", "proc-test")]
	if stale.ErrorCode != int(proc.CodeNotRunning) || stale.ErrorMsg != "process(proc-test) is not running" {
		t.Fatalf("stale pid: %+v", stale)
	}
	if c := decodeStatus(t, stale.Content); c.Process[0].Instance[0].Pid != -1 {
		t.Fatalf("stale pid must report pid -1: %+v", c)
	}
}

func TestStatusFailuresStayPerHost(t *testing.T) {
	e := newEnv(t, 4)
	h := e.bed.Hosts
	for _, host := range h {
		if _, err := host.StartSample("gse", "svc", ""); err != nil {
			t.Fatal(err)
		}
	}
	e.startWorker()
	e.register("gse", "svc", sampleSpec("gse", "svc"), proc.Target{IP: h[0].IP}, proc.Target{IP: h[1].IP}, proc.Target{IP: h[2].IP}, proc.Target{IP: h[3].IP})
	if err := h[1].Stop(); err != nil {
		t.Fatal(err)
	}
	if err := h[2].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h[2].Resume() })
	const absent = "127.1.0.1" // valid, but in no inventory
	req := statusRequest("gse", "svc", [2]any{0, h[0].IP}, [2]any{0, h[1].IP}, [2]any{0, h[2].IP}, [2]any{0, absent}, [2]any{0, h[3].IP})
	began := time.Now()
	out, errOut, code := e.starter(req, "api", "operate_process", "-f", "-", "--wait")
	took := time.Since(began)
	if code != cli.ExitHostsFailed {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	r := decodeResult(t, out)
	want := map[string]proc.Code{
		h[0].IP: proc.CodeSuccess, h[1].IP: proc.CodeUnreachable, h[2].IP: proc.CodeUnreachable,
		absent: proc.CodeUnknownHost, h[3].IP: proc.CodeSuccess,
	}
	for ip, c := range want {
		got := r.Data[key(ip, "gse", "svc")]
		if got.ErrorCode != int(c) {
			t.Errorf("%s: code %d (%s), want %d", ip, got.ErrorCode, got.ErrorMsg, c)
		}
		if c != proc.CodeSuccess && got.ErrorMsg == "" {
			t.Errorf("%s: failure without a message", ip)
		}
	}
	if took > policies.DefaultOpTimeout {
		t.Fatalf("the batch took %s, longer than the op timeout %s", took, policies.DefaultOpTimeout)
	}
	chaosCount(t, "faults", 2) // a stopped and a hung sshd
	chaosCount(t, "ops", 1)
}

func TestStatusRefusesChangedHostKey(t *testing.T) {
	e := newEnv(t, 2)
	h := e.bed.Hosts
	for _, host := range h {
		if _, err := host.StartSample("gse", "svc", ""); err != nil {
			t.Fatal(err)
		}
	}
	e.startWorker()
	e.register("gse", "svc", sampleSpec("gse", "svc"), proc.Target{IP: h[0].IP}, proc.Target{IP: h[1].IP})
	if err := h[0].RotateHostKey(); err != nil {
		t.Fatal(err)
	}
	accepted := func() int {
		b, _ := os.ReadFile(h[0].LogPath())
		return strings.Count(string(b), "Accepted publickey")
	}
	before := accepted()
	out, _, _ := e.starter(statusRequest("gse", "svc", [2]any{0, h[0].IP}, [2]any{0, h[1].IP}), "api", "operate_process", "--wait")
	r := decodeResult(t, out)
	got := r.Data[key(h[0].IP, "gse", "svc")]
	if got.ErrorCode != int(proc.CodeHostKey) || !strings.Contains(got.ErrorMsg, "host key") {
		t.Fatalf("changed key: %+v", got)
	}
	if ok := r.Data[key(h[1].IP, "gse", "svc")]; ok.ErrorCode != 0 {
		t.Fatalf("other host: %+v", ok)
	}
	if after := accepted(); after != before {
		t.Fatalf("a session was authenticated on the host with the changed key (%d -> %d)", before, after)
	}
}

func TestStatusAsAccountThroughSudo(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	pid, err := h.StartSample("app", "worker", "drover-app")
	if err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	item := func(account string) proc.Item {
		return proc.Item{
			Target:  proc.Target{IP: h.IP},
			Process: proc.ProcessID{Namespace: "app", Name: "worker"},
			Spec:    &proc.Spec{ProcName: "worker", SetupPath: "/data/app", PidPath: "/data/app/worker.pid", Account: account},
		}
	}
	res := e.runOperate(workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStatus, Items: []proc.Item{item("drover-app")}})
	got := res.Results[0]
	if got.Code != proc.CodeSuccess {
		t.Fatalf("as drover-app: %+v", got)
	}
	if c := decodeStatus(t, got.Content); c.Process[0].Instance[0].Pid != pid {
		t.Fatalf("as drover-app: pid %d, want %d", c.Process[0].Instance[0].Pid, pid)
	}
	res = e.runOperate(workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStatus, Items: []proc.Item{item("no-such-account")}})
	if got := res.Results[0]; got.Code != proc.CodeSudoRefused {
		t.Fatalf("unknown account: %+v", got)
	}
}

func TestStatusThroughBastion(t *testing.T) {
	e := newEnv(t, 2)
	jump, inner := e.bed.Hosts[0], e.bed.Hosts[1]
	pid, err := inner.StartSample("gse", "svc", "")
	if err != nil {
		t.Fatal(err)
	}
	e.writeInventory([]map[string]any{
		{"ip": jump.IP, "bk_cloud_id": 0, "bk_supplier_id": 0},
		// Cloud area 3 is reached only through the bastion; its identity ip
		// is the area's own address, the test bed's sshd is `address`.
		{"ip": "10.3.0.7", "bk_cloud_id": 3, "bk_supplier_id": 0, "address": inner.IP},
	}, map[string]any{"3": map[string]any{"bastion": "root@" + jump.IP + ":22"}})
	e.startWorker()
	e.register("gse", "svc", sampleSpec("gse", "svc"), proc.Target{CloudID: 3, IP: "10.3.0.7"})

	req := statusRequest("gse", "svc", [2]any{3, "10.3.0.7"})
	out, errOut, code := e.starter(req, "api", "operate_process", "--wait")
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	r := decodeResult(t, out)
	got := r.Data["3:0:10.3.0.7:gse:svc"]
	if c := decodeStatus(t, got.Content); got.ErrorCode != 0 || c.Process[0].Instance[0].Pid != pid {
		t.Fatalf("through bastion: %+v", got)
	}
	// With the bastion down, the host is unreachable though its sshd is up.
	if err := jump.Stop(); err != nil {
		t.Fatal(err)
	}
	e.worker.Stop() // a new worker has no pooled connection through the old path
	e.startWorker()
	out, _, _ = e.starter(req, "api", "operate_process", "--wait")
	got = decodeResult(t, out).Data["3:0:10.3.0.7:gse:svc"]
	if got.ErrorCode != int(proc.CodeUnreachable) || !strings.Contains(got.ErrorMsg, jump.IP) {
		t.Fatalf("bastion down: %+v", got)
	}
	if _, err := inner.Exec("true"); err != nil {
		t.Fatalf("inner host should still be up: %v", err)
	}
}

func TestStarterRejectsBadRequestWithoutStarting(t *testing.T) {
	e := newEnv(t, 1)
	// Nothing listens here: a request that got as far as Temporal would
	// exit with ExitUnavailable instead.
	e.cfg.TemporalAddress = "127.0.0.1:1"
	out, _, code := e.starter(`{"meta":{"namespace":"gse","name":"p"},"hosts":[{"ip":"1.2.3","bk_cloud_id":0,"bk_supplier_id":0}],"op_type":2}`,
		"api", "operate_process", "--wait")
	if code != cli.ExitBadRequest {
		t.Fatalf("exit %d, want bad request", code)
	}
	r := decodeResult(t, out)
	if r.Result || r.Code != gseapi.CodeBadRequest || !strings.Contains(r.Message, "hosts[0].ip") {
		t.Fatalf("response %+v", r)
	}
}

func TestResultOfUnknownTask(t *testing.T) {
	e := newEnv(t, 1)
	out, _, code := e.starter("", "result", "GSETASK:20200101000000:000000000001")
	if code != cli.ExitBadRequest {
		t.Fatalf("exit %d", code)
	}
	if r := decodeResult(t, out); r.Result || r.Code != gseapi.CodeTaskNotFound {
		t.Fatalf("response %+v", r)
	}
}

func TestRefusedAuthenticationHasItsOwnCode(t *testing.T) {
	e := newEnv(t, 2)
	good, bad := e.bed.Hosts[0], e.bed.Hosts[1]
	wrongKey := filepath.Join(t.TempDir(), "wrong_key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", wrongKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	e.writeInventory([]map[string]any{
		{"ip": good.IP, "bk_cloud_id": 0, "bk_supplier_id": 0},
		{"ip": bad.IP, "bk_cloud_id": 0, "bk_supplier_id": 0, "identity_file": wrongKey},
	}, nil)
	e.startWorker()
	spec := sampleSpec("gse", "svc")
	items := []proc.Item{
		{Target: proc.Target{IP: good.IP}, Process: proc.ProcessID{Namespace: "gse", Name: "svc"}, Spec: &spec},
		{Target: proc.Target{IP: bad.IP}, Process: proc.ProcessID{Namespace: "gse", Name: "svc"}, Spec: &spec},
	}
	res := e.runOperate(workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStatus, Items: items})
	if res.Results[0].Code != proc.CodeNotRunning {
		t.Fatalf("good host: %+v", res.Results[0])
	}
	if r := res.Results[1]; r.Code != proc.CodeAuthFailed || !strings.Contains(r.Message, "auth") {
		t.Fatalf("wrong key: %+v", r)
	}
}

// TestStatusFollowsTheRegistry: status ops on one worker reuse what they
// read of a host's registry only while the registry is unchanged; an
// update or unregister in between is what the next status answers by.
func TestStatusFollowsTheRegistry(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	if _, err := h.StartSample("gse", "proc-test", ""); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	spec := sampleSpec("gse", "proc-test")
	it := proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "gse", Name: "proc-test"}}
	e.register("gse", "proc-test", spec, it.Target)
	wantCode(t, "status", e.op(proc.OpStatus, it), proc.CodeSuccess)
	wantCode(t, "status again", e.op(proc.OpStatus, it), proc.CodeSuccess)

	moved := spec
	moved.PidPath = "/data/gse/elsewhere.pid"
	update := it
	update.Spec = &moved
	wantCode(t, "update to a pid file that does not exist", e.op(proc.OpSpecUpdate, update), proc.CodeSuccess)
	wantCode(t, "status after the update", e.op(proc.OpStatus, it), proc.CodeNotRunning)
	wantCode(t, "unregister", e.op(proc.OpSpecUnregister, it), proc.CodeSuccess)
	wantCode(t, "status after unregister", e.op(proc.OpStatus, it), proc.CodeNotRegistered)
}
