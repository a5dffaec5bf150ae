package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// editInventory writes the inventory at path as an operator's tooling
// would, a new file renamed over the old: hosts, known_hosts and any other
// top-level keys in extra. It notes the hosts for cleanup.
func (e *env) editInventory(path, knownHosts string, hosts []*testbed.Host, extra map[string]any) {
	e.t.Helper()
	list := make([]map[string]any, len(hosts))
	for i, h := range hosts {
		list[i] = map[string]any{"ip": h.IP, "bk_cloud_id": 0}
	}
	doc := map[string]any{"known_hosts": knownHosts, "hosts": list,
		"defaults": map[string]any{"user": "root", "port": 22, "identity_file": e.bed.ClientKeyPath}}
	for k, v := range extra {
		doc[k] = v
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		e.t.Fatal(err)
	}
	e.writeAtomic(path, string(b))
	for _, h := range hosts {
		e.hostIDs[workflows.HostWorkflowID(proc.HostID{IP: h.IP})] = true
	}
}

func (e *env) writeAtomic(path, text string) {
	e.t.Helper()
	if err := os.WriteFile(path+".new", []byte(text), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		e.t.Fatal(err)
	}
}

// startLoggedWorker starts the in-process worker logging to a buffer the
// test reads.
func (e *env) startLoggedWorker() *syncBuffer {
	e.t.Helper()
	logs := &syncBuffer{}
	w, err := cli.StartWorker(e.cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		e.t.Fatalf("start worker: %v", err)
	}
	e.worker = w
	e.t.Cleanup(w.Stop)
	return logs
}

// waitLog waits for a log line holding every one of parts.
func waitLog(t *testing.T, logs *syncBuffer, what string, parts ...string) {
	t.Helper()
	waitFor(t, 20*time.Second, what, func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return true
			}
		}
		return false
	})
}

func invItem(h *testbed.Host, dir string) proc.Item {
	spec := appSpec(dir)
	return proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "inv", Name: dir}, Spec: &spec}
}

// TestInventoryEditedUnderRunningWorker edits the inventory under a running
// worker, as an operator does: a host added (with its key in a new
// known_hosts the edit points at) is used at once, an op already running on
// a host the edit removes finishes, a later op there answers 9104, and a
// broken file keeps the last good inventory, saying why in the log.
func TestInventoryEditedUnderRunningWorker(t *testing.T) {
	e := newEnv(t, 3)
	h0, h1, h2 := e.bed.Hosts[0], e.bed.Hosts[1], e.bed.Hosts[2]
	for _, h := range e.bed.Hosts {
		installApp(t, h, "inv")
	}
	// h1's start takes 4 s: the edit lands while it runs.
	if _, err := h1.Exec(`sed -i 's/^sleep 0.2$/sleep 4/' /data/inv/start.sh`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	full, err := os.ReadFile(e.bed.KnownHostsPath)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(full), "\n") {
		if !strings.Contains(l, h2.IP+" ") && !strings.Contains(l, "["+h2.IP+"]") {
			lines = append(lines, l)
		}
	}
	partial := filepath.Join(dir, "known_hosts.before")
	if err := os.WriteFile(partial, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "inventory.yaml")
	e.editInventory(path, partial, []*testbed.Host{h0, h1}, nil)
	e.cfg.Inventory = path
	logs := e.startLoggedWorker()

	r := e.op(proc.OpStart, invItem(h2, "inv"))
	wantCode(t, "start on a host not yet in the inventory", r, proc.CodeUnknownHost)

	slow := workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStart, Items: []proc.Item{invItem(h1, "inv")}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := engine.StartOperate(ctx, e.client, e.cfg.TaskQueue, slow); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "h1's start under way on the host", func() bool {
		out, _ := h1.Exec("cat /data/inv/starts.log 2>/dev/null || true")
		return strings.Contains(out, "start")
	})
	e.editInventory(path, e.bed.KnownHostsPath, []*testbed.Host{h0, h2}, nil)
	waitLog(t, logs, "the edit reloaded", `msg="inventory reloaded"`, "added=1 removed=1")

	res, err := engine.WaitOperateAll(ctx, e.client, slow.TaskID)
	if err != nil || len(res.Results) != 1 {
		t.Fatalf("the op under way: %v %+v", err, res)
	}
	wantCode(t, "the start that began before its host was removed", res.Results[0].HostResult, proc.CodeSuccess)
	wantCode(t, "start on the added host, whose key only the new known_hosts has", e.op(proc.OpStart, invItem(h2, "inv")), proc.CodeSuccess)
	if pid := hostPid(t, h2, "/data/inv/svc.pid"); pid == 0 || !hostAlive(h2, pid) {
		t.Fatalf("the added host runs no svc (pid %d)", pid)
	}
	r = e.op(proc.OpStatus, invItem(h1, "inv"))
	wantCode(t, "status on the removed host", r, proc.CodeUnknownHost)
	if !strings.Contains(r.Message, "not in the inventory") {
		t.Fatalf("9104's message: %q", r.Message)
	}

	e.writeAtomic(path, "known_hosts: "+e.bed.KnownHostsPath+"\nhosts:\n  - {ip: "+h2.IP+", port: twenty-two}\n")
	waitLog(t, logs, "the broken file refused", "inventory not reloaded: the last good inventory stays in use", path, "hosts[0].port")
	wantCode(t, "status on h2 under the last good inventory", e.op(proc.OpStatus, invItem(h2, "inv")), proc.CodeSuccess)
	wantCode(t, "start on h0 under the last good inventory", e.op(proc.OpStart, invItem(h0, "inv")), proc.CodeSuccess)
}

// TestInventoryRemovedHostSupervision: a supervised host taken out of the
// inventory keeps its registry; its supervision pauses with one event that
// says why, and resumes once the host is back (after the host workflow's
// pause of policies.WatchFailureBackoff), restarting the process it finds
// dead.
func TestInventoryRemovedHostSupervision(t *testing.T) {
	t.Parallel() // it mostly waits
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "sup")
	path := filepath.Join(t.TempDir(), "inventory.yaml")
	e.editInventory(path, e.bed.KnownHostsPath, []*testbed.Host{h}, nil)
	e.cfg.Inventory = path
	logs := e.startLoggedWorker()
	it := invItem(h, "sup")
	wantCode(t, "start", e.op(proc.OpStart, it), proc.CodeSuccess)

	e.editInventory(path, e.bed.KnownHostsPath, nil, nil)
	waitLog(t, logs, "the host removed", `msg="inventory reloaded"`, "removed=1")
	waitFor(t, 30*time.Second, "supervision paused", e.hasEvent(t, h, workflows.EventWatchFailed))
	evs := e.events(t, h)
	if countKind(evs, workflows.EventWatchFailed) != 1 {
		t.Fatalf("events: %+v", evs)
	}
	for _, ev := range evs {
		if ev.Kind == workflows.EventWatchFailed && !strings.Contains(ev.Detail, "host 0:"+h.IP+" was removed from the inventory") {
			t.Fatalf("the pause does not say why: %q", ev.Detail)
		}
	}
	if en := e.entry(t, h.IP, it.Process); !en.Managed {
		t.Fatalf("the removed host's registry entry: %+v", en)
	}

	e.editInventory(path, e.bed.KnownHostsPath, []*testbed.Host{h}, nil)
	waitLog(t, logs, "the host back", `msg="inventory reloaded"`, "added=1")
	pid := hostPid(t, h, "/data/sup/svc.pid")
	if _, err := h.Exec("kill -9 " + strconv.Itoa(pid)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the dead process restarted by supervision", e.hasEvent(t, h, workflows.EventRestartSuccess))
	if n := countKind(e.events(t, h), workflows.EventWatchFailed); n != 1 {
		t.Fatalf("%d pause events, want 1", n)
	}
}

// TestInventorySourcesDriveOps: hosts from an Ansible inventory (the real
// ansible-inventory output under inventory/testdata) and from a BlueKing
// CMDB host list are selected by their groups and run an op.
func TestInventorySourcesDriveOps(t *testing.T) {
	e := newEnv(t, 3)
	h0, h1, h2 := e.bed.Hosts[0], e.bed.Hosts[1], e.bed.Hosts[2]
	for _, h := range e.bed.Hosts {
		installApp(t, h, "src")
	}
	dir := t.TempDir()
	ansible, err := os.ReadFile(filepath.Join(testbed.ModuleRoot(), "inventory/testdata/ansible/e2e.ini.json"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("BED_HOST_0", h0.IP, "BED_HOST_1", h1.IP).Replace(string(ansible))
	if err := os.WriteFile(filepath.Join(dir, "ansible.json"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmdb := `{"result": true, "code": 0, "message": "success", "data": {"count": 1, "info": [{"host": {"bk_host_id": 7, "bk_cloud_id": 0,
"bk_host_innerip": "` + h2.IP + `,10.99.0.7", "bk_agent_id": "020000000000000000000000000000cmdb7", "bk_os_type": "1"},
"topo": [{"bk_set_id": 2, "bk_set_name": "game", "module": [{"bk_module_id": 3, "bk_module_name": "gamesvr"}]}]}]}}`
	if err := os.WriteFile(filepath.Join(dir, "cmdb.json"), []byte(cmdb), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "inventory.yaml")
	e.editInventory(path, e.bed.KnownHostsPath, nil, map[string]any{"sources": []map[string]any{
		{"format": "ansible", "file": "ansible.json"}, {"format": "cmdb", "file": "cmdb.json"}}})
	e.cfg.Inventory = path
	e.noteHosts(path)
	e.startWorker()

	out, errOut, code := e.starter("", "hosts", "--hosts", "agent:020000000000000000000000000000cmdb7")
	if code != 0 || !strings.Contains(out, h2.IP) {
		t.Fatalf("the CMDB host by its agent id: exit %d\n%s", code, out)
	}
	if !strings.Contains(errOut, "warning: inventory: sources[0] (ansible ") || !strings.HasSuffix(strings.TrimSpace(errOut), "ignored variables ansible_python_interpreter") {
		t.Fatalf("the ignored Ansible variable is not named: %q", errOut)
	}
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte(`identity: {proc_name: svc, setup_path: /data/src, pid_path: /data/src/svc.pid}
control: {start_cmd: ./start.sh, stop_cmd: ./stop.sh}
monitor_policy: {auto_type: 1, start_check_secs: 1}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// web is the Ansible group, game/gamesvr the CMDB set and module.
	const sel = "web,group:game/gamesvr"
	if out, errOut, code := e.starter("", "register", "--namespace", "src", "--name", "svc", "--hosts", sel, "--spec", spec, "-o", "json"); code != 0 ||
		strings.Count(out, `"error_code": 0`) != 3 {
		t.Fatalf("register: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := e.starter("", "start", "--namespace", "src", "--name", "svc", "--hosts", sel, "--wait"); code != 0 {
		t.Fatalf("start: exit %d\n%s%s", code, out, errOut)
	}
	for _, h := range e.bed.Hosts {
		if pid := hostPid(t, h, "/data/src/svc.pid"); pid == 0 || !hostAlive(h, pid) {
			t.Fatalf("%s runs no svc after the start (pid %d)", h.IP, pid)
		}
	}
}

// TestWorkerReloadsOnSIGHUP: the worker binary sent SIGHUP reloads its
// inventory, says so, and goes on serving ops, where it used to exit.
func TestWorkerReloadsOnSIGHUP(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "hup")
	logPath := filepath.Join(t.TempDir(), "worker.log")
	cmd, _ := startBinary(t, "worker", nil, logPath, "--temporal-address", e.cfg.TemporalAddress,
		"--task-queue", e.cfg.TaskQueue, "--inventory", e.cfg.Inventory, "--log-level", "info")
	readLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	waitFor(t, time.Minute, "the worker started", func() bool { return strings.Contains(readLog(), "worker started") })
	// Unset, the pool is sized from the open-file limit the worker inherits.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("max_pooled_connections=%d", policies.PooledConnections(lim.Cur, 256)); !strings.Contains(readLog(), want) {
		t.Errorf("the start line does not say %s:\n%s", want, readLog())
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the reload logged", func() bool {
		return strings.Contains(readLog(), `msg="inventory reloaded"`) && strings.Contains(readLog(), "reason=signal")
	})
	wantCode(t, "start after the SIGHUP", e.op(proc.OpStart, invItem(h, "hup")), proc.CodeSuccess)
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the worker is gone after SIGHUP: %v\n%s", err, readLog())
	}
}

// TestServeFollowsInventory: `starter serve` maps agent ids with the
// inventory as it is now: an agent id an edit gives a host names that host
// at the next request, where it answered 9104 before.
func TestServeFollowsInventory(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	path := filepath.Join(t.TempDir(), "inventory.yaml")
	e.editInventory(path, e.bed.KnownHostsPath, []*testbed.Host{h}, nil)
	e.cfg.Inventory = path
	e.startWorker()
	srv := e.startServe(t, "inventory-secret-"+randomHex(t, 8))
	agent := randomHex(t, 18)
	statusCode := func() float64 {
		t.Helper()
		resp := srv.post(t, "/api/v2/proc/operate_proc_multi",
			`{"proc_operate_req":[{"meta":{"namespace":"inv","name":"svc"},"agent_id_list":["`+agent+`"],"op_type":2}]}`)
		task, _ := resp["data"].(map[string]any)["task_id"].(string)
		if task == "" {
			t.Fatalf("operate_proc_multi: %v", resp)
		}
		var code float64
		waitFor(t, time.Minute, "task "+task, func() bool {
			r, _ := srv.post(t, "/api/v2/proc/get_proc_operate_result_v2", `{"task_id":"`+task+`"}`)["data"].(map[string]any)[agent+":inv:svc"].(map[string]any)
			code, _ = r["error_code"].(float64)
			return r != nil && code != float64(proc.CodeRunning)
		})
		return code
	}
	if code := statusCode(); code != float64(proc.CodeUnknownHost) {
		t.Fatalf("an agent id no host has: code %v, want 9104", code)
	}
	hosts := []map[string]any{{"ip": h.IP, "bk_cloud_id": 0, "agent_id": agent}}
	e.editInventory(path, e.bed.KnownHostsPath, nil, map[string]any{"hosts": hosts})
	waitFor(t, 20*time.Second, "the server's reload", func() bool {
		return strings.Contains(srv.log(), `"msg":"inventory reloaded"`)
	})
	if code := statusCode(); code != float64(proc.CodeNotRegistered) {
		t.Fatalf("the agent id the edit gave the host: code %v, want 9106 (nothing registered there)", code)
	}
}
