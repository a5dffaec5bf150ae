package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// rolloutFleet registers roll/svc on every host of the env: a start_cmd
// that logs each run to /data/roll/start.log and starts the process, or,
// on the hosts in failing, logs the run and exits 1.
func (e *env) rolloutFleet(t *testing.T, failing map[int]bool) {
	t.Helper()
	cmds := map[int]string{}
	for i := range failing {
		cmds[i] = `echo started >> start.log; exit 1`
	}
	e.rolloutFleetWith(t, cmds)
}

// rolloutFleetWith is rolloutFleet with the start_cmd of some hosts given.
func (e *env) rolloutFleetWith(t *testing.T, cmds map[int]string) {
	t.Helper()
	good := `echo started >> start.log; cp "$(command -v sleep)" ./svc 2>/dev/null; setsid ./svc 86400 </dev/null >/dev/null 2>&1 & echo $! > svc.pid`
	byCmd := map[string][]proc.Target{}
	var order []string
	for i, h := range e.bed.Hosts {
		if _, err := h.Exec("mkdir -p /data/roll"); err != nil {
			t.Fatal(err)
		}
		cmd, ok := cmds[i]
		if !ok {
			cmd = good
		}
		if _, seen := byCmd[cmd]; !seen {
			order = append(order, cmd)
		}
		byCmd[cmd] = append(byCmd[cmd], proc.Target{IP: h.IP})
	}
	for _, cmd := range order {
		spec := sampleSpec("roll", "svc")
		spec.StartCheck, spec.StartCmd = time.Second, cmd
		e.register("roll", "svc", spec, byCmd[cmd]...)
	}
}

// startRuns is how many times start_cmd ran on each host, in host order.
func (e *env) startRuns(t *testing.T) []int {
	t.Helper()
	out := make([]int, len(e.bed.Hosts))
	for i, h := range e.bed.Hosts {
		s, err := h.Exec("cat /data/roll/start.log 2>/dev/null || true")
		if err != nil {
			t.Fatal(err)
		}
		out[i] = strings.Count(s, "started")
	}
	return out
}

// rolloutStatus runs `starter rollout ACTION ID` and returns its data.
func (e *env) rolloutStatus(t *testing.T, action, id string) workflows.RolloutStatus {
	t.Helper()
	out, errOut, code := e.starter("", "rollout", action, id)
	var resp struct {
		Data workflows.RolloutStatus `json:"data"`
	}
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &resp) != nil {
		t.Fatalf("rollout %s %s: exit %d\n%s%s", action, id, code, out, errOut)
	}
	return resp.Data
}

func (e *env) waitRolloutState(t *testing.T, id, state string) workflows.RolloutStatus {
	t.Helper()
	var st workflows.RolloutStatus
	waitFor(t, 3*time.Minute, "rollout "+state, func() bool {
		st = e.rolloutStatus(t, "status", id)
		return st.State == state
	})
	return st
}

// resultCodes reads get_proc_operate_result for the task through the CLI,
// in host order.
func (e *env) resultCodes(t *testing.T, id string) []int {
	t.Helper()
	out, _, _ := e.starter("", "result", id)
	r := decodeResult(t, out)
	codes := make([]int, len(e.bed.Hosts))
	for i, h := range e.bed.Hosts {
		res, ok := r.Data[key(h.IP, "roll", "svc")]
		if !ok {
			t.Fatalf("get_proc_operate_result of %s has no key for %s:\n%s", id, h.IP, out)
		}
		codes[i] = res.ErrorCode
	}
	return codes
}

var taskIDPattern = regexp.MustCompile(`GSETASK:[0-9]+:[0-9]+`)

// TestRolloutStopsPastMaxFail: 20 hosts, canary 1, batches of 5, 3 hosts
// whose start_cmd fails and max_fail 2. The rollout stops after the batch
// that crossed the budget; the hosts after it never ran start_cmd, and
// get_proc_operate_result answers them 9111.
func TestRolloutStopsPastMaxFail(t *testing.T) {
	e := newEnv(t, 20)
	e.startWorker()
	failing := map[int]bool{2: true, 3: true, 7: true} // batch 2 has two, batch 3 the third
	e.rolloutFleet(t, failing)
	out, errOut, code := e.starter("", "start", "--namespace", "roll", "--name", "svc", "--hosts", "all",
		"--canary", "1", "--batch", "5", "--max-fail", "2", "--wait")
	if code != cli.ExitHostsFailed {
		t.Fatalf("rollout exit %d, want %d:\n%s%s", code, cli.ExitHostsFailed, out, errOut)
	}
	id := taskIDPattern.FindString(errOut)
	if id == "" {
		t.Fatalf("the rollout did not name its task id:\n%s", errOut)
	}
	runs, codes := e.startRuns(t), e.resultCodes(t, id)
	for i := range e.bed.Hosts {
		wantRuns, wantCode := 1, 0
		switch {
		case i >= 11: // after the third batch (hosts 6-10)
			wantRuns, wantCode = 0, int(proc.CodeNotRun)
		case failing[i]:
			wantCode = int(proc.CodeCommandFailed)
		}
		if runs[i] != wantRuns || codes[i] != wantCode {
			t.Fatalf("host %d: start_cmd ran %d times, code %d; want %d, %d (runs %v, codes %v)", i, runs[i], codes[i], wantRuns, wantCode, runs, codes)
		}
	}
	st := e.rolloutStatus(t, "status", id)
	if st.State != workflows.RolloutFailed || st.Batch != 3 || st.Batches != 5 || st.NotRun != 9 || st.Failed != 3 {
		t.Fatalf("status %+v, want failed after batch 3 of 5 with 3 failed and 9 not run", st)
	}
	// A canary, then batches until the failure budget ran out.
	e.recordHistory(id, "rollout-canary-max-fail")
	e.recordHistory(id+"/batch-1", "rollout-chunk")
	// The search attributes show it too.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitFor(t, time.Minute, "search attributes of the rollout", func() bool {
		resp, err := e.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId = '%s' AND DroverRolloutState = 'failed' AND DroverRolloutBatch = 3", id)})
		return err == nil && len(resp.Executions) == 1
	})
}

// TestRolloutSurvivesWorkerAndServer: the same rollout, held for approval
// after its canary, survives a SIGKILL of the worker and a restart of the
// dev server; approved, it completes, and start_cmd ran exactly once on
// every host.
func TestRolloutSurvivesWorkerAndServer(t *testing.T) {
	t.Parallel() // it mostly waits
	own := testbed.NewTemporal(t, testbed.TemporalOptions{DBFile: filepath.Join(t.TempDir(), "temporal.db"),
		SearchAttributes: workflows.SearchAttributeTypes})
	e := newEnv(t, 20)
	e.cfg.TemporalAddress = own.Address
	e.client = e.dial(t)
	worker := e.startWorkerProcess(t)
	failing := map[int]bool{2: true, 3: true, 7: true}
	e.rolloutFleet(t, failing)
	out, errOut, code := e.starter("", "start", "--namespace", "roll", "--name", "svc", "--hosts", "all",
		"--canary", "1", "--batch", "5", "--max-fail", "3", "--approve-after-canary", "--no-wait")
	id := strings.TrimSpace(out)
	if code != cli.ExitOK || !taskIDPattern.MatchString(id) {
		t.Fatalf("rollout start exit %d: %s%s", code, out, errOut)
	}
	e.waitRolloutState(t, id, workflows.RolloutWaitingApproval)

	if err := syscall.Kill(-worker.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = worker.Process.Wait()
	if err := own.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	e.client = e.dial(t)
	e.startWorkerProcess(t)
	// Still held: only the canary ran.
	st := e.rolloutStatus(t, "status", id)
	if st.State != workflows.RolloutWaitingApproval || st.Batch != 1 || st.Done != 1 {
		t.Fatalf("after the restarts: %+v, want waiting_approval after the canary", st)
	}
	if runs := e.startRuns(t); fmt.Sprint(runs[1:]) != fmt.Sprint(make([]int, 19)) || runs[0] != 1 {
		t.Fatalf("start_cmd runs while waiting for approval: %v", runs)
	}
	if st := e.rolloutStatus(t, "approve", id); st.State == workflows.RolloutAborted {
		t.Fatalf("approve answered %+v", st)
	}
	st = e.waitRolloutState(t, id, workflows.RolloutDone)
	if st.Done != 20 || st.Failed != 3 || st.NotRun != 0 {
		t.Fatalf("done: %+v", st)
	}
	// Held for approval across a worker's and the server's restart.
	e.recordHistory(id, "rollout-approval")
	runs, codes := e.startRuns(t), e.resultCodes(t, id)
	for i := range runs {
		want := 0
		if failing[i] {
			want = int(proc.CodeCommandFailed)
		}
		if runs[i] != 1 || codes[i] != want {
			t.Fatalf("host %d: start_cmd ran %d times, code %d; want once, %d (runs %v)", i, runs[i], codes[i], want, runs)
		}
	}
}

// TestRolloutControlsOverCLIAndHTTP: a rollout started over drover's HTTP
// endpoint is paused over HTTP, resumed and paused again from the CLI,
// approved while paused (it stays paused) and aborted over HTTP: the hosts
// after the canary never run. A second, started from the CLI, is aborted
// from the CLI.
func TestRolloutControlsOverCLIAndHTTP(t *testing.T) {
	e := newEnv(t, 3)
	e.startWorker()
	e.rolloutFleet(t, nil)
	g := &gseapi.Gateway{Engine: &engine.Engine{Client: e.client, TaskQueue: e.cfg.TaskQueue},
		Apps: []gseapi.App{{Code: "ops", Secret: "s3cret-value"}}, Timeout: time.Minute}
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	auth := `"bk_app_code":"ops","bk_app_secret":"s3cret-value","bk_username":"alice"`
	post := func(path, body string) (int, gseapi.Response) {
		t.Helper()
		var out gseapi.Response
		return postJSON(t, srv.URL+path, body, nil, &out), out
	}
	state := func(r gseapi.Response) string {
		m, _ := r.Data.(map[string]any)
		s, _ := m["state"].(string)
		return s
	}
	var hosts []string
	for _, h := range e.bed.Hosts {
		hosts = append(hosts, fmt.Sprintf(`{"ip":%q,"bk_cloud_id":0,"bk_supplier_id":0}`, h.IP))
	}
	entry := `{"meta":{"namespace":"roll","name":"svc"},"op_type":0,"hosts":[` + strings.Join(hosts, ",") + `]}`

	// A bad rollout object is refused, naming the field, and starts nothing.
	status, resp := post("/api/v2/drover/rollout", `{`+auth+`,"proc_operate_req":[`+entry+`],"rollout":{"canary":1,"batch":"150%"}}`)
	if status != http.StatusBadRequest || !strings.Contains(resp.Message, "rollout") || !strings.Contains(resp.Message, "150%") {
		t.Fatalf("bad rollout: %d %+v", status, resp)
	}
	status, resp = post("/api/v2/drover/rollout", `{`+auth+`,"proc_operate_req":[`+entry+`],"rollout":{"canary":1,"batch":1,"approve_after_canary":true}}`)
	data, _ := resp.Data.(map[string]any)
	id, _ := data["task_id"].(string)
	if status != http.StatusOK || !taskIDPattern.MatchString(id) {
		t.Fatalf("rollout over HTTP: %d %+v", status, resp)
	}
	e.waitRolloutState(t, id, workflows.RolloutWaitingApproval)
	control := func(action string) string {
		t.Helper()
		status, resp := post("/api/v2/drover/rollout/"+action, `{`+auth+`,"task_id":"`+id+`"}`)
		if status != http.StatusOK {
			t.Fatalf("%s over HTTP: %d %+v", action, status, resp)
		}
		return state(resp)
	}
	if s := control("pause"); s != workflows.RolloutPaused {
		t.Fatalf("after pause over HTTP: %q", s)
	}
	if st := e.rolloutStatus(t, "resume", id); st.State != workflows.RolloutWaitingApproval {
		t.Fatalf("after resume from the CLI: %+v", st)
	}
	if st := e.rolloutStatus(t, "pause", id); st.State != workflows.RolloutPaused {
		t.Fatalf("after pause from the CLI: %+v", st)
	}
	if st := e.rolloutStatus(t, "approve", id); st.State != workflows.RolloutPaused || st.Batch != 1 {
		t.Fatalf("an approval while paused must leave it paused: %+v", st)
	}
	if s := control("abort"); s != workflows.RolloutAborted {
		t.Fatalf("after abort over HTTP: %q", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := engine.WaitOperate(ctx, e.client, id); err != nil {
		t.Fatal(err)
	}
	if codes := e.resultCodes(t, id); fmt.Sprint(codes) != "[0 9111 9111]" {
		t.Fatalf("codes after abort: %v", codes)
	}
	// Paused, resumed, paused, approved while paused, aborted.
	e.recordHistory(id, "rollout-pause-abort")
	if runs := e.startRuns(t); fmt.Sprint(runs) != "[1 0 0]" {
		t.Fatalf("start_cmd runs after abort: %v", runs)
	}
	// A control of an ended rollout is refused, naming the task.
	if status, resp := post("/api/v2/drover/rollout/resume", `{`+auth+`,"task_id":"`+id+`"}`); status != http.StatusBadRequest || !strings.Contains(resp.Message, "has ended") {
		t.Fatalf("resume of an ended rollout: %d %+v", status, resp)
	}

	// From the CLI: a restart rollout, aborted while it waits.
	out, errOut, code := e.starter("", "restart", "--namespace", "roll", "--name", "svc", "--hosts", "all",
		"--canary", "1", "--batch", "1", "--approve-after-canary", "--no-wait")
	id2 := strings.TrimSpace(out)
	if code != cli.ExitOK || !taskIDPattern.MatchString(id2) {
		t.Fatalf("rollout from the CLI: exit %d %s%s", code, out, errOut)
	}
	e.waitRolloutState(t, id2, workflows.RolloutWaitingApproval)
	if st := e.rolloutStatus(t, "abort", id2); st.State != workflows.RolloutAborted {
		t.Fatalf("after abort from the CLI: %+v", st)
	}
	e.waitRolloutState(t, id2, workflows.RolloutAborted)
	if runs := e.startRuns(t); fmt.Sprint(runs) != "[2 0 0]" {
		t.Fatalf("start_cmd runs after the second rollout: %v", runs)
	}
	if _, err := engine.WaitOperate(ctx, e.client, id2); err != nil {
		t.Fatal(err)
	}
	e.recordHistory(id2, "rollout-abort-waiting-approval")
}

// TestRolloutHealthGate: a process that passes its start check but dies
// within min_healthy fails its host with 9110, which spends the budget:
// the rollout stops, and the host after it never runs.
func TestRolloutHealthGate(t *testing.T) {
	t.Parallel() // it mostly waits
	e := newEnv(t, 3)
	e.startWorker()
	// Host 1's process lives 3 s: past its 1 s start check, within the
	// 6 s min_healthy.
	e.rolloutFleetWith(t, map[int]string{1: `echo started >> start.log; cp "$(command -v sleep)" ./svc 2>/dev/null; setsid ./svc 3 </dev/null >/dev/null 2>&1 & echo $! > svc.pid`})
	out, errOut, code := e.starter("", "start", "--namespace", "roll", "--name", "svc", "--hosts", "all",
		"--batch", "1", "--min-healthy", "6s", "--wait")
	id := taskIDPattern.FindString(errOut)
	if code != cli.ExitHostsFailed || id == "" {
		t.Fatalf("rollout exit %d:\n%s%s", code, out, errOut)
	}
	if codes := e.resultCodes(t, id); fmt.Sprint(codes) != fmt.Sprint([]int{0, int(proc.CodeUnhealthy), int(proc.CodeNotRun)}) {
		t.Fatalf("codes %v, want 0, 9110, 9111", codes)
	}
	if runs := e.startRuns(t); fmt.Sprint(runs) != "[1 1 0]" {
		t.Fatalf("start_cmd runs %v", runs)
	}
	if !strings.Contains(out, "not running") || !strings.Contains(out, "within min_healthy 6s after the op") {
		t.Fatalf("the recap does not say why host 1 failed:\n%s", out)
	}
	e.recordHistory(id, "rollout-health-gate")
}
