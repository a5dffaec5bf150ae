package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
)

// seedRequest reads a seed document's own request example (kept verbatim in
// testdata) with only its ip and paths adapted to the test bed.
func seedRequest(t *testing.T, name string, replace ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "seeds", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer(replace...).Replace(string(b))
}

// callSeed writes the body to a file and runs the built starter binary,
// `starter api NAME -f FILE` with extra args, as an operator would.
func (e *env) callSeed(t *testing.T, api, body string, args ...string) (map[string]any, int) {
	t.Helper()
	f := filepath.Join(t.TempDir(), api+".json")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	full := append([]string{"api", api, "-f", f}, args...)
	full = append(full, "--temporal-address", e.cfg.TemporalAddress, "--task-queue", e.cfg.TaskQueue, "--inventory", e.cfg.Inventory)
	out, errOut, code := runBinary(t, buildBinary(t, "starter"), full...)
	var resp map[string]any
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("%s: response is not JSON: %v\n%s%s", api, err, out, errOut)
	}
	for _, k := range []string{"result", "code", "message", "data"} {
		if _, ok := resp[k]; !ok {
			t.Fatalf("%s: response lacks %q: %s", api, k, out)
		}
	}
	return resp, code
}

// runBinary runs a built binary and returns its stdout, stderr and exit code.
func runBinary(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return stdout.String(), stderr.String(), code
}

// hostEntry returns data[key] of a keyed response, checking its documented fields.
func hostEntry(t *testing.T, resp map[string]any, key string) hostResultEntry {
	t.Helper()
	data, _ := resp["data"].(map[string]any)
	raw, ok := data[key].(map[string]any)
	if !ok {
		t.Fatalf("no result under %q: %v", key, resp["data"])
	}
	for _, k := range []string{"error_code", "error_msg", "content"} {
		if _, ok := raw[k]; !ok {
			t.Fatalf("%s lacks %q", key, k)
		}
	}
	b, _ := json.Marshal(raw)
	var r hostResultEntry
	_ = json.Unmarshal(b, &r)
	return r
}

// newSeedEnv is one sshd host as two identities, cloud 1 supplier 2 for
// seeds 000 and 004 and cloud 0 for 001-003, with the seeds' app installed
// and a worker running.
func newSeedEnv(t *testing.T) (*env, *testbed.Host) {
	t.Helper()
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	e.writeInventory([]map[string]any{
		{"ip": h.IP, "bk_cloud_id": 0, "bk_supplier_id": 0},
		{"ip": h.IP, "bk_cloud_id": 1, "bk_supplier_id": 2, "address": h.IP},
	}, nil)
	installNamedApp(t, h, "gsetest", "proc-test")
	e.startWorker()
	return e, h
}

func TestSeedExamplesEndToEnd(t *testing.T) {
	// Beside the suite's other parallel tests: it mostly waits on ops of one host.
	t.Parallel()
	e, h := newSeedEnv(t)
	ip := h.IP
	at := func(s string) []string { return []string{"10.0.0.1", ip} }
	key := "1:2:" + ip + ":gse:proc-test"

	// Seed 004: register_proc_info answers synchronously, keyed per host.
	reg := seedRequest(t, "register_proc_info", at("")...)
	resp, code := e.callSeed(t, "register_proc_info", reg)
	if r := hostEntry(t, resp, key); code != cli.ExitOK || r.ErrorCode != 0 {
		t.Fatalf("register_proc_info: exit %d %+v", code, r)
	}
	resp, _ = e.callSeed(t, "register_proc_info", reg)
	if r := hostEntry(t, resp, key); r.ErrorCode != int(proc.CodeAlreadyExists) {
		t.Fatalf("second register: %+v", r)
	}

	// Seed 000 on the registered spec: start, status, restart, stop.
	op := func(opType string) hostResultEntry {
		body := seedRequest(t, "operate_process", "10.0.0.1", ip, `"op_type": 0`, `"op_type": `+opType)
		resp, _ := e.callSeed(t, "operate_process", body, "--wait")
		return hostEntry(t, resp, key)
	}
	accepted, code := e.callSeed(t, "operate_process", seedRequest(t, "operate_process", "10.0.0.1", ip, `"op_type": 0`, `"op_type": 2`))
	if data, _ := accepted["data"].(map[string]any); code != cli.ExitOK || !strings.HasPrefix(data["task_id"].(string), "GSETASK:") {
		t.Fatalf("operate_process without --wait must answer data.task_id: %v", accepted)
	}
	if r := op("0"); r.ErrorCode != 0 {
		t.Fatalf("start: %+v", r)
	}
	pid := hostPid(t, h, "/data/gsetest/proc-test.pid")
	st := op("2")
	c := decodeStatus(t, st.Content)
	full := map[string]any{}
	_ = json.Unmarshal([]byte(st.Content), &full)
	instRaw := full["process"].([]any)[0].(map[string]any)["instance"].([]any)[0].(map[string]any)
	if st.ErrorCode != 0 || c.Process[0].Instance[0].Pid != pid || instRaw["version"] != "1.2.3" || instRaw["health"] != "1" || instRaw["isAuto"] != true {
		t.Fatalf("status: %+v %v", st, instRaw)
	}
	if r := op("7"); r.ErrorCode != 0 || hostPid(t, h, "/data/gsetest/proc-test.pid") == pid {
		t.Fatalf("restart: %+v", r)
	}
	if r := op("1"); r.ErrorCode != 0 {
		t.Fatalf("stop: %+v", r)
	}
	if r := op("5"); r.ErrorCode != int(proc.CodeBadOpType) {
		t.Fatalf("op_type 5: %+v", r)
	}

	// Seed 001 (v1) asks for bat scripts: an ssh host says why it cannot.
	v1 := seedRequest(t, "operate_proc", "10.0.0.1", ip, "/usr/local/xxx", "/data/xxx")
	resp, code = e.callSeed(t, "operate_proc", v1)
	data, _ := resp["data"].(map[string]any)
	task, _ := data["bk_gse_taskid"].(string)
	if code != cli.ExitOK || !strings.HasPrefix(task, "GSETASK:") {
		t.Fatalf("operate_proc must answer data.bk_gse_taskid: %v", resp)
	}
	resp, _ = e.callSeed(t, "operate_proc", v1, "--wait")
	if r := hostEntry(t, resp, "0:0:"+ip+":1:gseagent"); r.ErrorCode != int(proc.CodeBadSpec) || !strings.Contains(r.ErrorMsg, "bat") {
		t.Fatalf("v1 bat on ssh: %+v", r)
	}

	// Seed 002 (v2): stop of a process that is not running.
	v2 := seedRequest(t, "operate_proc_v2", "10.0.0.1", ip, "/usr/local/xxx", "/data/xxx")
	resp, _ = e.callSeed(t, "operate_proc_v2", v2, "--wait")
	if r := hostEntry(t, resp, "0:0:"+ip+":1:gseagent"); r.ErrorCode != int(proc.CodeNotRunning) ||
		r.ErrorMsg != "no need to stop the process(gseagent) that is not running" {
		t.Fatalf("v2 stop: %+v", r)
	}

	// Seed 002 again, as drover-app with inline commands: start, as that account.
	asApp := strings.NewReplacer(`"op_type": 1`, `"op_type": 0`, `"account": "root"`, `"account": "drover-app"`,
		`"contact": "root",`, `"contact": "root", "start_cmd": "setsid ./gseagent 600 </dev/null >/dev/null 2>&1 & echo $! > /data/xxx/gseagent.pid", "start_check_begin_time": 1,`,
		`"pid_path": "/data/xxx"`, `"pid_path": "/data/xxx/gseagent.pid"`).Replace(v2)
	if _, err := h.Exec(`mkdir -p /data/xxx && cp "$(command -v sleep)" /data/xxx/gseagent && chown -R drover-app /data/xxx`); err != nil {
		t.Fatal(err)
	}
	resp, _ = e.callSeed(t, "operate_proc_v2", asApp, "--wait")
	if r := hostEntry(t, resp, "0:0:"+ip+":1:gseagent"); r.ErrorCode != 0 {
		t.Fatalf("v2 start as drover-app: %+v", r)
	}
	owner, _ := h.Exec(`stat -c %U /proc/$(cat /data/xxx/gseagent.pid)`)
	if strings.TrimSpace(owner) != "drover-app" {
		t.Fatalf("started as %q, want drover-app", strings.TrimSpace(owner))
	}

	// Seed 003: manage_proc register (managed), then unregister twice.
	manage := seedRequest(t, "manage_proc", "10.0.0.1", ip)
	resp, _ = e.callSeed(t, "manage_proc", manage, "--wait")
	nginxKey := "0:0:" + ip + ":1:key_test"
	if r := hostEntry(t, resp, nginxKey); r.ErrorCode != 0 {
		t.Fatalf("manage_proc register: %+v", r)
	}
	unmanage := strings.Replace(manage, `"op_type": 1`, `"op_type": 2`, 1)
	resp, _ = e.callSeed(t, "manage_proc", unmanage, "--wait")
	if r := hostEntry(t, resp, nginxKey); r.ErrorCode != 0 {
		t.Fatalf("manage_proc unregister: %+v", r)
	}
	resp, _ = e.callSeed(t, "manage_proc", unmanage, "--wait")
	if r := hostEntry(t, resp, nginxKey); r.ErrorCode != int(proc.CodeNotRunning) {
		t.Fatalf("manage_proc unregister again: %+v", r)
	}

	// update and unregister_proc_info, same shape as register.
	resp, _ = e.callSeed(t, "update_proc_info", reg)
	if r := hostEntry(t, resp, key); r.ErrorCode != 0 {
		t.Fatalf("update_proc_info: %+v", r)
	}
	resp, _ = e.callSeed(t, "unregister_proc_info", reg)
	if r := hostEntry(t, resp, key); r.ErrorCode != 0 {
		t.Fatalf("unregister_proc_info: %+v", r)
	}
	if r := op("2"); r.ErrorCode != int(proc.CodeNotRegistered) {
		t.Fatalf("status after unregister: %+v", r)
	}
}
