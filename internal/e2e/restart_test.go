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

// buildBinary builds cmd/<name> once per test binary.
func buildBinary(t *testing.T, name string) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if p, ok := binPaths[name]; ok {
		return p
	}
	dir, err := os.MkdirTemp("", "drover-e2e-bin-")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", p, "./cmd/"+name)
	cmd.Dir = testbed.ModuleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	binPaths[name] = p
	return p
}

// startWorkerProcess runs the worker binary; the returned stop kills it.
func (e *env) startWorkerProcess(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(buildBinary(t, "worker"), "--temporal-address", e.cfg.TemporalAddress,
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

func TestProgressWhileRunning(t *testing.T) {
	e := newEnv(t, 2)
	fast, slow := e.bed.Hosts[0], e.bed.Hosts[1]
	installApp(t, fast, "app")
	installApp(t, slow, "app")
	if _, err := slow.Exec(`sed -i 's/^sleep 0.2$/sleep 6/' /data/app/start.sh`); err != nil {
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
	waitFor(t, 60*time.Second, "task done", func() bool {
		out, _, _ := e.starter("", "result", accepted.Data.TaskID)
		res := decodeResult(t, out)
		f, s := res.Data[fastKey].ErrorCode, res.Data[slowKey].ErrorCode
		if f == 0 && s == int(proc.CodeRunning) {
			sawPartial = true
		}
		return f != int(proc.CodeRunning) && s != int(proc.CodeRunning)
	})
	if !sawPartial {
		t.Fatal("never saw the fast host done while the slow one was still 115")
	}
}
