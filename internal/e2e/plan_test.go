package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-sh/drover/internal/cli"
)

// TestPlanChangesNothing plans a v1 operate_proc start with the default
// commands, a setup path with a space and a process name with a
// semicolon: the plan shows the exact command line, quoted for sh, groups
// the hosts, names what it could not resolve, and no host saw a session.
func TestPlanChangesNothing(t *testing.T) {
	e := newEnv(t, 2)
	h := e.bed.Hosts
	body, _ := json.Marshal(map[string]any{
		"bk_app_code": "e2e", "bk_username": "tester", "bk_biz_id": 7, "op_type": 0,
		"process_infos": []map[string]any{{
			"setup_path": "/data/x y", "proc_name": "a;b", "pid_path": "/data/x y/a.pid", "account": "root",
			"ip_list": []map[string]any{
				{"ip": h[0].IP, "bk_cloud_id": 0, "bk_supplier_id": 0},
				{"ip": h[1].IP, "bk_cloud_id": 0, "bk_supplier_id": 0},
				{"ip": "10.255.255.9", "bk_cloud_id": 0, "bk_supplier_id": 0},
			},
		}},
	})
	file := filepath.Join(t.TempDir(), "req.json")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	before := []int{accepted(t, h[0]), accepted(t, h[1])}
	// No worker runs: a plan of inline specs needs none, and nothing
	// could run the op even if the plan started it by mistake.
	out, errOut, code := e.starter("", "api", "operate_proc", "-f", file, "--plan")
	if code != cli.ExitOK {
		t.Fatalf("plan exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{
		"run       cd '/data/x y' && ./start.sh 'a;b' &",
		"as        root (ssh login root, no sudo)",
		"on 2 hosts:",
		"0:0:" + h[0].IP + ":7:a;b",
		"0:0:" + h[1].IP + ":7:a;b",
		`"setup_path":"/data/x y"`,
		"? could not resolve 1 selector term or host",
		"0:0:10.255.255.9:7:a;b: host bk_cloud_id=0 ip=10.255.255.9 is not in the inventory (9104)",
		"Plan: 2 to start, 0 would fail, 1 unresolved. Nothing was changed on any host.",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("plan lacks %q:\n%s", want, out)
		}
	}
	// The same two hosts share one group: the command line is printed once.
	if n := strings.Count(out, "./start.sh"); n != 1 {
		t.Fatalf("plan prints the command %d times, want once (grouped):\n%s", n, out)
	}
	// The plan ran nothing: the hosts' sshd accepted no session, and no
	// task was started.
	for i, host := range h[:2] {
		if got := accepted(t, host); got != before[i] {
			t.Fatalf("host %s accepted %d sessions during the plan", host.IP, got-before[i])
		}
	}
	if _, err := os.Stat(filepath.Join(h[0].DataDir, "x y")); err == nil {
		t.Fatalf("the plan created the setup path on a host")
	}

	// A verb's plan names the selector term it could not resolve and
	// still plans the hosts it could.
	out, errOut, code = e.starter("", "stop", "--namespace", "ns", "--name", "n", "--hosts", h[0].IP+",nosuchgroup", "--plan")
	if code != cli.ExitOK {
		t.Fatalf("verb plan exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{"nosuchgroup", "0:0:" + h[0].IP + ":ns:n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("verb plan lacks %q:\n%s", want, out)
		}
	}
	// With rollout flags, the plan adds the batches the rollout would run.
	out, errOut, code = e.starter("", "restart", "--namespace", "ns", "--name", "n", "--hosts", h[0].IP+","+h[1].IP,
		"--canary", "1", "--batch", "50%", "--max-fail", "1", "--plan")
	if code != cli.ExitOK {
		t.Fatalf("rollout plan exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{
		"Rollout: 2 batches, the canary first; stops before the next batch once more than 1 of its hosts have failed.",
		"batch 1: 1 host: 0:0:" + h[0].IP + ":ns:n", "batch 2: 1 host: 0:0:" + h[1].IP + ":ns:n",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("rollout plan lacks %q:\n%s", want, out)
		}
	}
	for i, host := range h[:2] {
		if got := accepted(t, host); got != before[i] {
			t.Fatalf("host %s accepted %d sessions during the verb plans", host.IP, got-before[i])
		}
	}
}
