package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// deployItems spreads n inventory hosts over the bed's sshd hosts through
// `address`, each with the app installed in its own /data/deploy/<ip>, and
// points the env's inventory at them. Each start_cmd logs its run, waits
// slow, and only then starts the service: a start killed in its wait starts
// nothing.
func (e *env) deployItems(t *testing.T, n int, slow time.Duration) []proc.Item {
	t.Helper()
	var hosts []map[string]any
	var items []proc.Item
	for i := 0; i < n; i++ {
		h := e.bed.Hosts[i%len(e.bed.Hosts)]
		ip := fmt.Sprintf("10.7.0.%d", i+1)
		dir := "deploy/" + ip
		installApp(t, h, dir)
		if _, err := h.Exec(fmt.Sprintf(`sed -i 's/^setsid /sleep %d; setsid /' /data/%s/start.sh`, int(slow.Seconds()), dir)); err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, map[string]any{"ip": ip, "bk_cloud_id": 0, "address": h.IP})
		spec := appSpec(dir)
		spec.OpTimeout = slow + 20*time.Second
		items = append(items, proc.Item{Target: proc.Target{IP: ip}, Process: proc.ProcessID{Namespace: "dep", Name: "svc"}, Spec: &spec})
	}
	e.writeInventory(hosts, nil)
	return items
}

// startLines counts the runs of start_cmd logged by item i's app.
func (e *env) startLines(t *testing.T, i int, it proc.Item) int {
	t.Helper()
	h := e.bed.Hosts[i%len(e.bed.Hosts)]
	out, _ := h.Exec("grep -c start " + it.Spec.SetupPath + "/starts.log 2>/dev/null || true")
	var n int
	_, _ = fmt.Sscan(strings.TrimSpace(out), &n)
	return n
}

// exited reports a process's end on a channel, without failing the test
// from another goroutine.
func exited(cmd *exec.Cmd) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	return ch
}

// TestDeployLetsRunningOpsFinish: the worker gets SIGTERM while a 10 s
// start_cmd runs on 20 hosts, and a new worker starts. The old worker
// stops taking work but lets the running commands end: each start_cmd ran
// exactly once and every key answers 0. Supervision (whose watch the old
// worker held) goes on under the new worker.
func TestDeployLetsRunningOpsFinish(t *testing.T) {
	const n = 20
	e := newEnv(t, 4)
	items := e.deployItems(t, n+1, 10*time.Second)
	old := e.startWorkerBinary(t, buildBinary(t, "worker"), "--supervise-interval", "1s")
	oldEnd := exited(old)
	// A supervised process on a host of its own, which the op leaves alone:
	// the old worker holds its watch when the stop comes.
	clock := e.pollClock(t, items[n].Target.IP, e.bed.Hosts[n%len(e.bed.Hosts)], "clock")
	items = items[:n]

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	in := workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStart, Items: items}
	if err := engine.StartOperate(ctx, e.client, e.cfg.TaskQueue, in); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "every start_cmd running", func() bool {
		for i, it := range items {
			if e.startLines(t, i, it) == 0 {
				return false
			}
		}
		return true
	})
	if err := old.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	e.startWorkerBinary(t, buildBinary(t, "worker"), "--supervise-interval", "1s")

	// The old worker ends by itself, and only once every command it ran
	// has: each service is up (its start_cmd starts it last). The watch it
	// held did not keep it.
	select {
	case err := <-oldEnd:
		if err != nil {
			t.Fatalf("the stopped worker exited with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the stopped worker never exited")
	}
	for i, it := range items {
		if pid := hostPid(t, e.bed.Hosts[i%len(e.bed.Hosts)], it.Spec.PidPath); pid == 0 {
			t.Errorf("%s: the stopped worker exited before its start_cmd ended", it.Target.IP)
		}
	}

	res, err := engine.WaitOperateAll(ctx, e.client, in.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != n {
		t.Fatalf("%d results, want %d", len(res.Results), n)
	}
	for i, r := range res.Results {
		if r.Code != proc.CodeSuccess {
			t.Errorf("%s: %d %q, want 0", r.Key, r.Code, r.Message)
		}
		if got := e.startLines(t, i, items[i]); got != 1 {
			t.Errorf("%s: start_cmd ran %d times, want once", r.Key, got)
		}
	}
	clock.await(t)
}
