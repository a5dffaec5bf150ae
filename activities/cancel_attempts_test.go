package activities

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// TestProbeAfterACancelEndsWhatFailedAttemptsLeft: a task op's attempt
// whose worker died left its control command running on the host (noted
// in its attempt's file). The task is cancelled before another attempt.
// The probe after the cancel, told of one failed attempt, ends that
// command's process group before it probes; a probe told of none leaves
// a running command alone.
func TestProbeAfterACancelEndsWhatFailedAttemptsLeft(t *testing.T) {
	me, err := user.Current()
	must(t, err)
	dir := t.TempDir()
	a := oneHost(t, localRunner{})
	spec := proc.Spec{ProcName: "svcprog", SetupPath: dir, PidPath: dir + "/svcprog.pid", Account: me.Username,
		AutoType: proc.AutoResident, OpTimeout: 30 * time.Second}
	request := fmt.Sprintf("T%d#0", time.Now().UnixNano())
	pidFile := controlPidFile(request, 1)
	t.Cleanup(func() { _ = os.Remove(pidFile) })
	// Whatever the test saw, the gate opens at its end.
	t.Cleanup(func() { _ = os.WriteFile(dir+"/go", nil, 0o644) })

	// The lost attempt's restart_cmd, waiting at a gate that never opens.
	done := make(chan transport.Result, 1)
	go func() {
		script := controlScript(opMark{}, dir, "while [ ! -e "+dir+"/go ]; do sleep 0.1; done", time.Minute, &noting{files: opFilesOf(request), attempt: 1})
		res, _ := localRunner{}.Run(context.Background(), inventory.Host{}, script)
		done <- res
	}()
	waitNoted := time.Now()
	for {
		if b, err := os.ReadFile(pidFile); err == nil && strings.TrimSpace(string(b)) != "" {
			break
		}
		if time.Since(waitNoted) > 10*time.Second {
			t.Fatal("the control command never noted its process group")
		}
		time.Sleep(20 * time.Millisecond)
	}
	probe := func(endAttempts int32) HostOpOutput {
		t.Helper()
		out, err := a.HostOp(context.Background(), HostOpInput{RequestID: request + "/probe", Op: proc.OpStatus,
			Target: proc.Target{IP: "10.0.0.1"}, Process: proc.ProcessID{Namespace: "gse", Name: "svcprog"}, Spec: spec,
			EndRequestID: request, EndAttempts: endAttempts})
		must(t, err)
		return out
	}

	if out := probe(0); out.Result.Code != proc.CodeNotRunning {
		t.Fatalf("probe: %+v, want 829 (the process was never started)", out.Result)
	}
	select {
	case res := <-done:
		t.Fatalf("a probe told of no failed attempt ended the command: %s", res.Stdout)
	case <-time.After(time.Second):
	}
	// Two attempts failed: the second noted nothing (it never ran a
	// command), which ends nothing.
	if out := probe(2); out.Result.Code != proc.CodeNotRunning {
		t.Fatalf("probe: %+v, want 829", out.Result)
	}
	select {
	case res := <-done:
		if !strings.Contains(string(res.Stdout), "rc=137") {
			t.Fatalf("the command ended, but not by a kill: %q", res.Stdout)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the failed attempt's command still runs after the probe")
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Fatalf("the attempt's note is left: %v", err)
	}
}
