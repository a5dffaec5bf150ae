package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/cli"
)

// tableRows splits a table into rows of fields, keyed by the first field;
// the header is under "HOST".
func tableRows(out string) map[string][]string {
	rows := map[string][]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	return rows
}

// TestStarterStatusAndPs drives the operator's terminal against real hosts:
// status's per-host table, then ps before and after a process is killed
// and cannot come back, from what drover knows and live.
func TestStarterStatusAndPs(t *testing.T) {
	e := newEnv(t, 3)
	for _, h := range e.bed.Hosts {
		installApp(t, h, "app")
	}
	e.startWorker()
	web0, db, web2 := e.bed.Hosts[0], e.bed.Hosts[1], e.bed.Hosts[2]

	// A long start_interval keeps a failed restart waiting: the killed
	// process stays down while the test looks.
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte(`identity: {proc_name: svc, setup_path: /data/app, pid_path: /data/app/svc.pid, user: root}
control: {start_cmd: ./start.sh, stop_cmd: ./stop.sh, version_cmd: ./version.sh}
resource: {cpu: 50, mem: 50}
monitor_policy: {auto_type: 1, start_check_secs: 1, start_retries: 3, start_interval: 600}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// `--hosts web` is the group, as Ansible's --limit web.
	for _, verb := range [][]string{{"register", "--spec", spec}, {"start"}} {
		args := append([]string{verb[0], "--namespace", "web", "--name", "svc", "--hosts", "web", "--wait"}, verb[1:]...)
		if out, errOut, code := e.starter("", args...); code != 0 || !strings.Contains(out, "2 hosts: 2 success (0)") {
			t.Fatalf("%s: exit %d\n%s%s", verb[0], code, out, errOut)
		}
	}
	pid0, pid2 := hostPid(t, web0, "/data/app/svc.pid"), hostPid(t, web2, "/data/app/svc.pid")

	out, errOut, code := e.starter("", "status", "--namespace", "web", "--name", "svc", "--hosts", "web", "--wait")
	t.Logf("starter status:\n%s", out)
	rows := tableRows(out)
	if code != 0 || strings.Join(rows["HOST"], " ") != "HOST CODE PID UPTIME CPU% MEM% MANAGED VERSION MESSAGE" {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	for _, c := range []struct {
		ip  string
		pid int
	}{{web0.IP, pid0}, {web2.IP, pid2}} {
		r := rows["0:"+c.ip]
		if len(r) != 9 || r[1] != "0" || r[2] != strconv.Itoa(c.pid) || !strings.HasSuffix(r[3], "s") || r[6] != "yes" || r[7] != "1.2.3" || r[8] != "success" {
			t.Fatalf("status row of %s, want pid %d: %v\n%s", c.ip, c.pid, r, out)
		}
		if _, err := strconv.ParseFloat(r[4], 64); err != nil {
			t.Fatalf("cpu%% of %s: %q", c.ip, r[4])
		}
		if _, err := strconv.ParseFloat(r[5], 64); err != nil {
			t.Fatalf("mem%% of %s: %q", c.ip, r[5])
		}
	}
	if _, ok := rows["0:"+db.IP]; ok {
		t.Fatalf("--hosts web selected the db host:\n%s", out)
	}
	out, _, _ = e.starter("", "status", "--namespace", "web", "--name", "svc", "--hosts", "web", "--wait", "-o", "wide")
	if r := tableRows(out)["0:"+web0.IP]; len(r) < 13 || r[9] != "1" || r[10] != "success" || !strings.HasSuffix(strings.Join(r, " "), "success /bin/sh ./svc") {
		t.Fatalf("status -o wide: %v\n%s", r, out)
	}

	// Kill one, and make its restarts fail: it should run and does not.
	if _, err := web0.Exec(`sed -i '2i exit 0' /data/app/start.sh; kill -9 ` + strconv.Itoa(pid0)); err != nil {
		t.Fatal(err)
	}
	var ps string
	waitFor(t, 30*time.Second, "ps shows the killed process stopped", func() bool {
		ps, errOut, code = e.starter("", "ps", "--hosts", "web")
		first := strings.Split(ps, "\n")[1]
		return code == 0 && strings.HasPrefix(first, "0:"+web0.IP) && strings.Contains(first, "process_restart_failed")
	})
	t.Logf("starter ps:\n%s", ps)
	lines := strings.Split(strings.TrimSpace(ps), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "HOST PROCESS EXPECTED ACTUAL MANAGED PID RESTARTS(24h) LAST EVENT SEEN" {
		t.Fatalf("ps header and rows:\n%s", ps)
	}
	killed, alive := strings.Fields(lines[1]), strings.Fields(lines[2])
	if strings.Join(killed[:7], " ") != "0:"+web0.IP+" web/svc running stopped yes - 1" || killed[7] != "process_restart_failed" {
		t.Fatalf("the killed process, first: %v\n%s", killed, ps)
	}
	if strings.Join(alive, " ") != fmt.Sprintf("0:%s web/svc running running yes %d 0 - supervised", web2.IP, pid2) {
		t.Fatalf("the running process: %v\n%s", alive, ps)
	}
	if lines[3] != "2 processes, 1 should run and do not" {
		t.Fatalf("ps summary: %q", lines[3])
	}
	out, _, _ = e.starter("", "ps", "--state", "failed", "-o", "json")
	var failed []struct {
		Host, Namespace, Name, Expected, Actual string
		Restarts                                int `json:"restarts_24h"`
	}
	if err := json.Unmarshal([]byte(out), &failed); err != nil || len(failed) != 1 || failed[0].Host != "0:"+web0.IP ||
		failed[0].Expected != "running" || failed[0].Actual != "stopped" || failed[0].Restarts != 1 {
		t.Fatalf("ps --state failed -o json: %v\n%s", err, out)
	}

	// The shell completes namespaces and names from the registry.
	if got := e.complete("ps", "--namespace", ""); got != "web" {
		t.Fatalf("--namespace completes to %q", got)
	}
	if got := e.complete("restart", "--namespace", "web", "--name", "s"); got != "svc" {
		t.Fatalf("--name completes to %q", got)
	}

	// Live: the same answer from the hosts themselves.
	ps, errOut, code = e.starter("", "ps", "--probe", "--namespace", "web")
	t.Logf("starter ps --probe:\n%s", ps)
	lines = strings.Split(strings.TrimSpace(ps), "\n")
	if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[1], "0:"+web0.IP) || !strings.Contains(lines[1], "running   stopped") ||
		!strings.HasSuffix(lines[1], "live") || !strings.Contains(lines[2], strconv.Itoa(pid2)) {
		t.Fatalf("ps --probe: exit %d\n%s%s", code, ps, errOut)
	}
	out, _, code = e.starter("", "status", "--namespace", "web", "--name", "svc", "--hosts", "web", "--wait")
	if r := tableRows(out)["0:"+web0.IP]; code != 1 || len(r) < 4 || r[1] != "829" || r[2] != "-" || r[6] != "yes" {
		t.Fatalf("status of the killed process: %v\n%s", r, out)
	}
}

// complete returns the shell completions of the last argument, one per
// line, without cobra's directive line.
func (e *env) complete(args ...string) string {
	e.t.Helper()
	full := append([]string{"__complete", args[0], "--temporal-address", e.cfg.TemporalAddress,
		"--task-queue", e.cfg.TaskQueue, "--inventory", e.cfg.Inventory}, args[1:]...)
	var out, errOut bytes.Buffer
	if code := cli.Execute(full, &out, &errOut); code != 0 {
		e.t.Fatalf("complete %v: exit %d %s", args, code, errOut.String())
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.HasPrefix(l, ":") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// syncBuffer is a buffer a command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStarterEventsFollow streams a restart that happens while following,
// and ends cleanly when interrupted.
func TestStarterEventsFollow(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	e.startWorker()
	_, pid := e.supervised(t, h, nil)

	var out, errOut syncBuffer
	root := cli.NewStarter(&out, &errOut)
	root.SetArgs([]string{"events", "--follow", "--namespace", "sup", "--temporal-address", e.cfg.TemporalAddress,
		"--task-queue", e.cfg.TaskQueue, "--inventory", e.cfg.Inventory})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	waitFor(t, 10*time.Second, "the header", func() bool { return strings.HasPrefix(out.String(), "TIME") })
	if strings.Contains(out.String(), "process_restart") {
		t.Fatalf("a restart before the kill:\n%s", out.String())
	}

	if _, err := h.Exec(fmt.Sprintf("kill -9 %d", pid)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the restart streamed", func() bool { return strings.Contains(out.String(), "process_restart_success") })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("interrupted follow: %v\n%s", err, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end when interrupted")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "0:"+h.IP) || !strings.Contains(lines[1], "sup/svc") {
		t.Fatalf("want the header and one restart:\n%s", out.String())
	}
	t.Logf("starter events --follow:\n%s", out.String())
}
