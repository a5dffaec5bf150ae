package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestSupervisionSurvivesAWorkerKilled: three worker processes supervise
// three hosts together; the one running the first host's shard watch is
// SIGKILLed, then the managed process on every host is killed. Each is
// running again within supervise_interval + start_check + 60 s (the shard
// watches the lost worker held are taken up by another after their
// heartbeat timeout), and each was started once.
func TestSupervisionSurvivesAWorkerKilled(t *testing.T) {
	t.Parallel() // it mostly waits
	e := newEnv(t, 3)
	workers := []*exec.Cmd{e.superviseWorker(t), e.superviseWorker(t), e.superviseWorker(t)}
	var clocks []pollClock
	pids := map[int]int{}
	for i, h := range e.bed.Hosts {
		installApp(t, h, "app")
		_, pids[i] = e.supervised(t, h, nil)
		clocks = append(clocks, e.pollClock(t, h.IP, h, "clock"))
	}
	awaitPolls(t, clocks) // every host's shard watch is running, on one worker or another

	// The worker to lose is the one watching the first host: killing one
	// that holds no watch would prove nothing.
	shard := workflows.ShardWorkflowID(e.cfg.WatchQueue(), workflows.HostWorkflowID(proc.HostID{IP: e.bed.Hosts[0].IP}), e.cfg.WatchShards)
	victim := -1
	waitFor(t, 30*time.Second, "the worker running "+shard+"'s watch", func() bool {
		pid := e.watchWorkerPid(t, shard)
		for i, w := range workers {
			if w.Process.Pid == pid {
				victim = i
			}
		}
		return victim >= 0
	})
	if err := syscall.Kill(-workers[victim].Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = workers[victim].Process.Wait()
	for i, h := range e.bed.Hosts {
		if _, err := h.Exec(fmt.Sprintf("kill -9 %d", pids[i])); err != nil {
			t.Fatal(err)
		}
	}
	// interval (1 s) + start_check (1 s) + 60 s.
	bound := 62 * time.Second
	began := time.Now()
	for i, h := range e.bed.Hosts {
		waitFor(t, bound-time.Since(began), fmt.Sprintf("host %d running again after its worker was lost", i), liveNewPid(t, h, pids[i]))
	}
	t.Logf("every process running again %s after the worker's loss", time.Since(began).Round(time.Second))
	// Two more polls of every host: nothing starts it a second time.
	awaitPolls(t, clocks)
	for i, h := range e.bed.Hosts {
		if out, _ := h.Exec("grep -c start /data/app/starts.log"); strings.TrimSpace(out) != "2" {
			t.Fatalf("host %d: started %s times, want 2 (the start and one restart)", i, strings.TrimSpace(out))
		}
	}
}

// watchWorkerPid is the pid of the worker process that last took up the
// shard workflow's watch activity (the SDK's identity is pid@host@...), or
// 0 while it has none.
func (e *env) watchWorkerPid(t *testing.T, shardID string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := e.client.DescribeWorkflowExecution(ctx, shardID, "")
	if err != nil {
		t.Fatalf("describe %s: %v", shardID, err)
	}
	for _, a := range d.GetPendingActivities() {
		if pid, err := strconv.Atoi(strings.SplitN(a.GetLastWorkerIdentity(), "@", 2)[0]); err == nil && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			return pid
		}
	}
	return 0
}

// superviseWorker runs a worker process polling every second.
func (e *env) superviseWorker(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(buildBinary(t, "worker"), "--temporal-address", e.cfg.TemporalAddress,
		"--task-queue", e.cfg.TaskQueue, "--inventory", e.cfg.Inventory, "--log-level", "warn",
		"--supervise-interval", e.cfg.SuperviseInterval.String())
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd
}
