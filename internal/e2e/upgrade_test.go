package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// periodicRuns lists the scheduled times of a host's periodic runs.
func (e *env) periodicRuns(t *testing.T, id proc.HostID) []time.Time {
	t.Helper()
	var out []time.Time
	for _, ev := range e.hostEvents(t, id) {
		if ev.Kind == workflows.EventPeriodicRun {
			out = append(out, ev.Scheduled)
		}
	}
	return out
}

// TestUpgradeKeepsSupervision: supervision and a periodic process run
// under the current build, which restarts a killed process once. The
// worker is stopped and a worker built with one GetVersion-guarded change
// to the host workflow's decisions (-tags upgradeprobe) takes over the
// running host workflow: replaying that restart must not fail. A killed
// process is restarted and the periodic runs carry on, none lost and none
// doubled. The running workflow keeps the old command sequence; its next
// run (after a renewal) takes the change.
func TestUpgradeKeepsSupervision(t *testing.T) {
	t.Parallel() // it mostly waits
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	id := proc.HostID{IP: h.IP}
	wid := workflows.HostWorkflowID(id)
	installApp(t, h, "app")
	if _, err := h.Exec("mkdir -p /data/job"); err != nil {
		t.Fatal(err)
	}
	probeBin := buildTagged(t, "worker", "upgradeprobe")
	old := e.startWorkerBinary(t, buildBinary(t, "worker"), "--supervise-interval", "1s")
	oldEnd := exited(old)
	app, pid := e.supervised(t, h, nil)
	periodic := proc.Spec{ProcName: "tick", SetupPath: "/data/job", PidPath: "/data/job/tick.pid",
		StartCmd: "date +%s.%N >> /data/job/runs.log", AutoType: proc.AutoPeriodic, CycleTime: 2 * time.Second,
		StartCheck: 200 * time.Millisecond}
	job := proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "job", Name: "tick"}, Spec: &periodic}
	wantCode(t, "register periodic", e.op(proc.OpSpecRegister, job), proc.CodeSuccess)
	job.Spec = nil
	wantCode(t, "manage periodic", e.op(proc.OpRegister, job), proc.CodeSuccess)
	pid = e.killAndAwaitRestart(t, h, pid, 1)
	waitFor(t, 30*time.Second, "two periodic runs under the current build", func() bool { return len(e.periodicRuns(t, id)) >= 2 })

	if err := old.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	select {
	case err := <-oldEnd:
		if err != nil {
			t.Fatalf("the stopped worker exited with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the stopped worker never exited")
	}
	e.startWorkerBinary(t, probeBin, "--supervise-interval", "1s")
	before := len(e.periodicRuns(t, id)) // answered by the upgraded worker
	pid = e.killAndAwaitRestart(t, h, pid, 2)
	waitFor(t, 30*time.Second, "two periodic runs under the upgraded worker", func() bool { return len(e.periodicRuns(t, id)) >= before+2 })
	// Every scheduled time ran once, across the stop and the upgrade.
	runs := e.periodicRuns(t, id)
	for i := 1; i < len(runs); i++ {
		if d := runs[i].Sub(runs[i-1]); d != 2*time.Second {
			t.Fatalf("scheduled runs %d and %d are %s apart, want one cycle: %v", i-1, i, d, runs)
		}
	}
	e.noFailedWorkflowTask(ctx, wid)
	if e.probeMarked(ctx, wid) {
		t.Fatal("the running workflow took the guarded change: its recorded decisions would not replay")
	}

	// The next run takes the change.
	desc, err := e.client.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		t.Fatal(err)
	}
	first := desc.WorkflowExecutionInfo.Execution.RunId
	if err := e.client.SignalWorkflow(ctx, wid, "", workflows.RenewSignal, nil); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "manage after renew", e.op(proc.OpRegister, app), proc.CodeSuccess)
	waitFor(t, 30*time.Second, "a new run", func() bool {
		d, err := e.client.DescribeWorkflowExecution(ctx, wid, "")
		return err == nil && d.WorkflowExecutionInfo.Execution.RunId != first
	})
	e.killAndAwaitRestart(t, h, pid, 1)
	if !e.probeMarked(ctx, wid) {
		t.Fatal("the new run's restart was not decided by the upgraded build: its memo mark is missing")
	}
	e.noFailedWorkflowTask(ctx, wid)

	// The same offline, as docs/upgrades.md checks a release: both
	// runs, exported with the temporal CLI, replay against the build.
	dir := t.TempDir()
	for name, run := range map[string]string{"first": first, "renewed": ""} {
		args := []string{"workflow", "show", "-w", wid, "-o", "json", "--address", e.cfg.TemporalAddress}
		if run != "" {
			args = append(args, "-r", run)
		}
		out, err := exec.Command(testbed.TemporalBinary(), args...).Output()
		if err != nil {
			t.Fatalf("temporal workflow show: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := replayExported(dir, "upgradeprobe"); err != nil {
		t.Fatalf("exported histories do not replay against the upgraded build: %v\n%s", err, out)
	}
	// A rollback to the build without the change would break the run that
	// took it, and the check says so.
	if out, err := replayExported(dir, ""); err == nil || !strings.Contains(string(out), "renewed.json") {
		t.Fatalf("the renewed run replayed against the build without the change: %v\n%s", err, out)
	}
}

// replayExported runs the replay test over the histories in dir, built
// with tags.
func replayExported(dir, tags string) ([]byte, error) {
	replay := exec.Command("go", "test", "-count=1", "-tags", tags, "-run", "TestReplayRecordedHistories", "./workflows/")
	replay.Dir = testbed.ModuleRoot()
	replay.Env = append(os.Environ(), "DROVER_REPLAY_DIR="+dir)
	return replay.CombinedOutput()
}

// killAndAwaitRestart kills the app and waits until supervision has
// started it again and recorded the restart as the run's nth.
func (e *env) killAndAwaitRestart(t *testing.T, h *testbed.Host, pid, nth int) int {
	t.Helper()
	if _, err := h.Exec(fmt.Sprintf("kill -9 %d", pid)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "restart after kill -9", liveNewPid(t, h, pid))
	waitFor(t, 10*time.Second, "restart event", func() bool { return countKind(e.events(t, h), workflows.EventRestartSuccess) >= nth })
	return hostPid(t, h, "/data/app/svc.pid")
}

// probeMarked reports whether the upgradeprobe build decided something in
// the host workflow's current run.
func (e *env) probeMarked(ctx context.Context, wid string) bool {
	e.t.Helper()
	desc, err := e.client.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		e.t.Fatal(err)
	}
	_, ok := desc.WorkflowExecutionInfo.GetMemo().GetFields()[workflows.UpgradeProbeMemo]
	return ok
}

// noFailedWorkflowTask fails the test if a workflow task of the current
// run failed (a nondeterminism error, say).
func (e *env) noFailedWorkflowTask(ctx context.Context, wid string) {
	e.t.Helper()
	hist := e.client.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for hist.HasNext() {
		ev, err := hist.Next()
		if err != nil {
			e.t.Fatal(err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
			e.t.Fatalf("a workflow task of %s failed: %v", wid, ev.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage())
		}
	}
}
