package activities

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// losesWorkerAfterStop runs scripts locally, but the first stop command it
// runs is followed by a panic: the worker is lost right after the process
// was stopped, before the op could answer.
type losesWorkerAfterStop struct {
	localRunner
	lost atomic.Bool
}

func (l *losesWorkerAfterStop) Run(ctx context.Context, h inventory.Host, cmd transport.Command) (transport.Result, error) {
	res, err := l.localRunner.Run(ctx, h, cmd)
	if strings.Contains(strings.Join(cmd.Args, " "), "stop-marker") && l.lost.CompareAndSwap(false, true) {
		panic("worker lost")
	}
	return res, err
}

// TestRetriedStopAfterALostWorkerSucceeds: a stop whose first attempt
// stopped the process and then lost its worker is retried; the retry finds
// the process gone and answers 0, not 829. It holds for a retry by the
// server (supervision's ops) and for one by the host workflow, which counts
// a task op's attempts in the input.
func TestRetriedStopAfterALostWorkerSucceeds(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "svcprog")
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sleep)
	must(t, err)
	must(t, os.WriteFile(prog, b, 0o755))
	for i, op := range []proc.OpType{proc.OpStop, proc.OpKill, proc.OpStop, proc.OpKill} {
		byWorkflow := i >= 2
		p := exec.Command(prog, "300")
		must(t, p.Start())
		t.Cleanup(func() { _ = p.Process.Kill() })
		go func() { _ = p.Wait() }() // reaped, so a killed one is gone, not a zombie
		pidFile := filepath.Join(dir, "svcprog.pid")
		must(t, os.WriteFile(pidFile, []byte(strconv.Itoa(p.Process.Pid)), 0o644))
		cmd := ": stop-marker; kill " + strconv.Itoa(p.Process.Pid)
		spec := proc.Spec{ProcName: "svcprog", SetupPath: dir, PidPath: pidFile, Account: me.Username,
			AutoType: proc.AutoResident, StopCmd: cmd, KillCmd: cmd, StopCheck: time.Second}
		acts := oneHost(t, &losesWorkerAfterStop{})

		var s testsuite.WorkflowTestSuite
		s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		env := s.NewTestWorkflowEnvironment()
		env.RegisterActivity(acts)
		run := func(ctx workflow.Context, in HostOpInput) (HostOpOutput, error) {
			var out HostOpOutput
			if !byWorkflow {
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
					RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Millisecond, MaximumAttempts: 3}})
				err := workflow.ExecuteActivity(ctx, acts.HostOp, in).Get(ctx, &out)
				return out, err
			}
			ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
				RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
			var err error
			for in.Attempt = 1; in.Attempt <= 3; in.Attempt++ {
				if err = workflow.ExecuteActivity(ctx, acts.HostOp, in).Get(ctx, &out); err == nil {
					break
				}
			}
			return out, err
		}
		env.RegisterWorkflow(run)
		env.ExecuteWorkflow(run, HostOpInput{Op: op, Target: proc.Target{IP: "10.0.0.1"}, Process: proc.ProcessID{Namespace: "gse", Name: "svc"}, Spec: spec})
		var out HostOpOutput
		if err := env.GetWorkflowError(); err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		must(t, env.GetWorkflowResult(&out))
		if out.Result.Code != proc.CodeSuccess {
			t.Fatalf("%v retried (by the workflow %v) after its worker was lost: %d %q, want 0", op, byWorkflow, out.Result.Code, out.Result.Message)
		}
	}
}
