package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/proc"
)

// TestEnsureConverges: on 10 hosts, 4 running and 6 not, `ensure --state
// running` reports 4 ok and 6 changed and exits 5; a second run changes
// nothing, reports 10 ok and exits 0.
func TestEnsureConverges(t *testing.T) {
	e := newEnv(t, 10)
	e.startWorker()
	hosts := e.bed.Hosts
	spec := sampleSpec("ens", "svc")
	spec.StartCmd = `cp "$(command -v sleep)" ./svc 2>/dev/null; setsid ./svc 86400 </dev/null >/dev/null 2>&1 & echo $! > svc.pid`
	spec.StartCheck = time.Second
	var targets []proc.Target
	for i, h := range hosts {
		if _, err := h.Exec("mkdir -p /data/ens"); err != nil {
			t.Fatal(err)
		}
		if i < 4 {
			if _, err := h.StartSample("ens", "svc", ""); err != nil {
				t.Fatal(err)
			}
		}
		targets = append(targets, proc.Target{IP: h.IP})
	}
	e.register("ens", "svc", spec, targets...)

	args := []string{"ensure", "--namespace", "ens", "--name", "svc", "--hosts", "all", "--state", "running"}
	out, errOut, code := e.starter("", args...)
	if code != cli.ExitChanged {
		t.Fatalf("first ensure exits %d, want %d (changed):\n%s%s", code, cli.ExitChanged, out, errOut)
	}
	if !strings.Contains(out, "RECAP: ok=4 changed=6 failed=0") {
		t.Fatalf("first ensure recap:\n%s", out)
	}
	for i, h := range hosts {
		want := "changed: [0:" + h.IP + "] => start"
		if i < 4 {
			want = "ok: [0:" + h.IP + "]"
		}
		if !strings.Contains(out, want+"\n") {
			t.Fatalf("first ensure lacks %q:\n%s", want, out)
		}
	}
	out, errOut, code = e.starter("", args...)
	if code != cli.ExitOK || !strings.Contains(out, "RECAP: ok=10 changed=0 failed=0") {
		t.Fatalf("second ensure exits %d, want 0 with 10 ok:\n%s%s", code, out, errOut)
	}

	// absent: a running process is stopped and its spec removed; once
	// gone, it is already so.
	absent := []string{"ensure", "--namespace", "ens", "--name", "svc", "--hosts", hosts[0].IP + "," + hosts[9].IP, "--state", "absent"}
	out, errOut, code = e.starter("", absent...)
	if code != cli.ExitChanged || !strings.Contains(out, "changed: [0:"+hosts[0].IP+"] => stop, unregister_proc_info\n") ||
		!strings.Contains(out, "RECAP: ok=0 changed=2 failed=0") {
		t.Fatalf("ensure --state absent exits %d:\n%s%s", code, out, errOut)
	}
	if out, _, code = e.starter("", absent...); code != cli.ExitOK || !strings.Contains(out, "RECAP: ok=2 changed=0 failed=0") {
		t.Fatalf("second ensure --state absent exits %d:\n%s", code, out)
	}

	// A host whose process is not registered cannot be converged to
	// running: it fails alone, named, and the exit says so.
	out, _, code = e.starter("", "ensure", "--namespace", "ens", "--name", "other", "--hosts", hosts[0].IP, "--state", "running")
	if code != cli.ExitHostsFailed || !strings.Contains(out, "failed: [0:"+hosts[0].IP+"] => process is not registered") {
		t.Fatalf("ensure of an unregistered process exits %d:\n%s", code, out)
	}
	// --managed contradicts stopped: refused before anything runs.
	_, errOut, code = e.starter("", "ensure", "--namespace", "ens", "--name", "svc", "--state", "stopped", "--managed")
	if code != cli.ExitBadRequest || !strings.Contains(errOut, "--managed: only with --state running") {
		t.Fatalf("ensure --state stopped --managed exits %d: %s", code, errOut)
	}
}
