package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// buildWorker builds cmd/worker once per test binary.
func buildWorker(t *testing.T) string {
	t.Helper()
	workerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "drover-e2e-bin-")
		if err != nil {
			workerErr = err
			return
		}
		workerBin = filepath.Join(dir, "worker")
		cmd := exec.Command("go", "build", "-o", workerBin, "./cmd/worker")
		cmd.Dir = testbed.ModuleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			workerErr = err
			workerBin = string(out)
		}
	})
	if workerErr != nil {
		t.Fatalf("build worker: %v\n%s", workerErr, workerBin)
	}
	return workerBin
}

// startWorkerProcess runs the worker binary; the returned stop kills it.
func (e *env) startWorkerProcess(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(buildWorker(t), "--temporal-address", e.cfg.TemporalAddress,
		"--task-queue", e.cfg.TaskQueue, "--inventory", e.cfg.Inventory, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd
}

func TestWorkerKilledMidOpIsFinishedByAnother(t *testing.T) {
	e := newEnv(t, 3)
	var targets []proc.Target
	for _, h := range e.bed.Hosts {
		installApp(t, h, "app")
		// A start that takes a while, so the worker dies during it.
		if _, err := h.Exec(`sed -i 's/^sleep 0.2$/sleep 3/' /data/app/start.sh`); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, proc.Target{IP: h.IP})
	}
	e.startWorker() // in-process, for registration and the client
	spec := appSpec("app")
	spec.StartCheck = 2 * time.Second
	e.register("1", "svc", spec, targets...)
	e.worker.Stop()

	first := e.startWorkerProcess(t)
	c := e.client
	items := make([]proc.Item, len(targets))
	for i, tg := range targets {
		items[i] = proc.Item{Target: tg, Process: proc.ProcessID{Namespace: "1", Name: "svc"}}
	}
	in := workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStart, Items: items}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := workflows.StartOperate(ctx, c, e.cfg.TaskQueue, in); err != nil {
		t.Fatal(err)
	}
	// Kill the worker once every host's start command is under way.
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := 0
		for _, h := range e.bed.Hosts {
			if out, _ := h.Exec("cat /data/app/starts.log 2>/dev/null"); strings.Contains(out, "start") {
				n++
			}
		}
		if n == len(e.bed.Hosts) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("start commands never began")
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(-first.Process.Pid, syscall.SIGKILL)
	_, _ = first.Process.Wait()

	e.startWorkerProcess(t)
	res, err := workflows.WaitOperateAll(ctx, c, in.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Results {
		if r.Code != proc.CodeSuccess {
			t.Errorf("%s: %+v", r.Key, r.HostResult)
		}
		h := e.bed.Hosts[i]
		if out, _ := h.Exec("grep -c start /data/app/starts.log"); strings.TrimSpace(out) != "1" {
			t.Errorf("%s: start_cmd ran %s times, want exactly 1", h.IP, strings.TrimSpace(out))
		}
		if pid := hostPid(t, h, "/data/app/svc.pid"); !hostAlive(h, pid) {
			t.Errorf("%s: not running after the op", h.IP)
		}
	}
}
