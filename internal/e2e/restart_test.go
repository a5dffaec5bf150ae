package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
)

// buildBinary builds cmd/<name> once per test binary.
func buildBinary(t *testing.T, name string) string { return buildTagged(t, name, "") }

// buildTagged builds cmd/<name> with build tags (none when empty), once per
// test binary.
func buildTagged(t *testing.T, name, tags string) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if p, ok := binPaths[name+"/"+tags]; ok {
		return p
	}
	dir, err := os.MkdirTemp("", "drover-e2e-bin-")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-tags", tags, "-o", p, "./cmd/"+name)
	cmd.Dir = testbed.ModuleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	binPaths[name+"/"+tags] = p
	return p
}

// startWorkerProcess runs the worker binary; the test's cleanup kills it.
func (e *env) startWorkerProcess(t *testing.T) *exec.Cmd {
	t.Helper()
	return e.startWorkerBinary(t, buildBinary(t, "worker"))
}

// startWorkerBinary runs a worker binary with the env's settings and extra
// flags; the test's cleanup kills it.
func (e *env) startWorkerBinary(t *testing.T, bin string, extra ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"--temporal-address", e.cfg.TemporalAddress,
		"--task-queue", e.cfg.TaskQueue, "--inventory", e.cfg.Inventory, "--log-level", "warn"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd
}

func TestProgressWhileRunning(t *testing.T) {
	e := newEnv(t, 2)
	fast, slow := e.bed.Hosts[0], e.bed.Hosts[1]
	installApp(t, fast, "app")
	installApp(t, slow, "app")
	// Slower to start its process than the answers' spacing
	// (policies.DeliverReportEvery), so the fast host's answer is
	// signalled while the slow host's start still runs.
	if _, err := slow.Exec(`sed -i 's/^echo start >>/sleep 14; echo start >>/' /data/app/start.sh`); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	e.register("1", "svc", appSpec("app"), proc.Target{IP: fast.IP}, proc.Target{IP: slow.IP})
	body := `{"meta":{"namespace":"1","name":"svc"},"op_type":0,"hosts":[` +
		`{"ip":"` + fast.IP + `","bk_cloud_id":0,"bk_supplier_id":0},{"ip":"` + slow.IP + `","bk_cloud_id":0,"bk_supplier_id":0}]}`
	out, _, code := e.starter(body, "api", "operate_process")
	var accepted struct {
		Data struct {
			TaskID string `json:"task_id"`
		} `json:"data"`
	}
	if err := jsonUnmarshal(out, &accepted); err != nil || code != 0 {
		t.Fatalf("submit: %s", out)
	}
	fastKey, slowKey := key(fast.IP, "1", "svc"), key(slow.IP, "1", "svc")
	sawPartial := false
	var last string
	waitFor(t, 60*time.Second, "task done", func() bool {
		out, _, _ := e.starter("", "result", accepted.Data.TaskID)
		last = out
		res := decodeResult(t, out)
		f, s := res.Data[fastKey].ErrorCode, res.Data[slowKey].ErrorCode
		if f == 0 && s == int(proc.CodeRunning) {
			sawPartial = true
		}
		return f != int(proc.CodeRunning) && s != int(proc.CodeRunning)
	})
	if !sawPartial {
		t.Fatalf("never saw the fast host done while the slow one was still 115; at the end:\n%s", last)
	}
}
