package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestCancelRestartMidWay cancels a restart of 100 hosts mid-way: each
// restart_cmd waits for its own gate file before restarting, the test
// opens ten gates, and once those ten have answered it runs `starter
// cancel`. The task ends; the ten
// finished their restart (0: a new pid, start_cmd ran once more); the
// other ninety never restarted: their waiting restart_cmd was ended (9109
// "cancelled while running", naming the process as running), their pid is
// the one before and start_cmd never ran again. No process is left stopped.
func TestCancelRestartMidWay(t *testing.T) {
	n, open := 100, 10
	if os.Getenv("DROVER_CANCEL_SMALL") != "" {
		n, open = 8, 2 // a quick look while changing the code
	}
	// One sshd host each: a waiting restart_cmd holds an SSH session, and
	// identities sharing an sshd would share its connection's sessions.
	e := newEnv(t, n)
	ids := e.fleet(t, n, "0.2")
	e.registerFleet(t, ids, func(s *proc.Spec) {
		s.RestartCmd = "touch waiting; while [ ! -e go ]; do sleep 0.1; done; exec ./restart.sh"
		// Far past the test's own waits: on a loaded machine the waiting
		// restarts must still be waiting, not timed out, when the cancel
		// comes.
		s.StartCheck, s.OpTimeout = time.Second, 15*time.Minute
	})
	for _, r := range e.waitOp(t, e.startOp(t, proc.OpStart, ids), 3*time.Minute) {
		wantCode(t, "start", r, proc.CodeSuccess)
	}
	// Unmanaged, so supervision never mends a process a cancel left
	// stopped: what the test sees is what the cancel did.
	for _, r := range e.waitOp(t, e.startOp(t, proc.OpUnregister, ids), 3*time.Minute) {
		wantCode(t, "stop managing", r, proc.CodeSuccess)
	}
	pids := map[string]int{}
	for _, id := range ids {
		pids[id.ip] = hostPid(t, id.host, id.pidPath())
	}

	task := e.startOp(t, proc.OpRestart, ids)
	for _, id := range ids[:open] {
		if _, err := id.host.Exec("touch /data/" + id.dir + "/go"); err != nil {
			t.Fatal(err)
		}
	}
	var progress workflows.OperateResult
	waitFor(t, 2*time.Minute, "the opened restarts answered", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		progress, err = engine.FetchOperate(ctx, e.client, task)
		return err == nil && progress.Done >= open
	})
	// Every closed gate has its restart_cmd waiting at it before the
	// cancel: a host the engine had not reached yet would answer "not
	// run", which is right, but not what this test is about.
	waitFor(t, 2*time.Minute, "every gated restart waiting", func() bool {
		for _, id := range ids[open:] {
			if _, err := os.Stat(filepath.Join(id.host.DataDir, id.dir, "waiting")); err != nil {
				return false
			}
		}
		return true
	})
	out, errOut, code := e.starter("", "cancel", task)
	var resp struct {
		Code int `json:"code"`
		Data struct {
			TaskID    string `json:"task_id"`
			Cancelled bool   `json:"cancelled"`
		} `json:"data"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &resp) != nil || resp.Code != 0 || !resp.Data.Cancelled || resp.Data.TaskID != task {
		t.Fatalf("starter cancel: exit %d\n%s%s", code, out, errOut)
	}
	e.explainIfStuck(t, task, 3*time.Minute)
	res := e.waitOp(t, task, time.Minute)

	finished, never := 0, 0
	for i, id := range ids {
		r, starts, pid := res[id.ip], id.starts(t), hostPid(t, id.host, id.pidPath())
		alive := pid != 0 && hostAlive(id.host, pid)
		switch {
		case !alive:
			t.Errorf("%s: left stopped (answer %d %q)", id.ip, r.Code, r.Message)
		case r.Code == proc.CodeSuccess:
			finished++
			if i >= open || starts != 2 || pid == pids[id.ip] {
				t.Errorf("%s: answered 0, but its gate was open %v, start_cmd ran %d times and pid %d (was %d)", id.ip, i < open, starts, pid, pids[id.ip])
			}
		case r.Code == proc.CodeCancelled:
			never++
			if starts != 1 || pid != pids[id.ip] {
				t.Errorf("%s: answered %q, but start_cmd ran %d times and pid %d (was %d)", id.ip, r.Message, starts, pid, pids[id.ip])
			}
			if !strings.Contains(r.Message, "cancelled while running") || !strings.Contains(r.Message, "process svc is running") {
				t.Errorf("%s: %q does not say its waiting restart_cmd was ended and the process runs", id.ip, r.Message)
			}
		default:
			t.Errorf("%s: answered %d %q, want 0 or 9109", id.ip, r.Code, r.Message)
		}
	}
	e.recordHistory(task, "operate-restart-cancelled")
	e.recordHistory(workflows.HostWorkflowID(proc.HostID{IP: ids[open].ip}), "host-op-cancelled")
	t.Logf("of %d: %d finished their restart, %d never restarted (their restart_cmd ended while it waited)", n, finished, never)
	if finished != open || never != n-open {
		t.Fatalf("%d finished and %d never restarted, want %d and %d", finished, never, open, n-open)
	}
	// The ended commands leave the hosts, not left waiting for their
	// gates. The task answers as soon as it cancels its hosts' activities;
	// each activity learns of the cancel at its next heartbeat and only
	// then ends its command, so on a loaded machine that takes a while.
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpStuckHosts(t, []proc.Item{ids[open].item()})
			e.dumpStuckHosts(t, []proc.Item{ids[open+1].item()})
		}
	})
	waitFor(t, 2*time.Minute, "the cancelled restart_cmds gone from the hosts", func() bool {
		out, _ := e.bed.Hosts[0].Exec("pgrep -f 'while \\[ ! -e g[o] ' || true")
		return strings.TrimSpace(out) == ""
	})
}

// explainIfStuck waits for a task; one still running at limit fails the
// test naming its pending hosts and where the first one's workflow waits.
func (e *env) explainIfStuck(t *testing.T, task string, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if _, err := engine.WaitOperate(ctx, e.client, task); err == nil {
		return
	}
	qctx, qcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer qcancel()
	res, err := engine.FetchOperate(qctx, e.client, task)
	if err != nil {
		t.Fatalf("task %s still running after %s: %v", task, limit, err)
	}
	var pending []string
	for _, r := range res.Results {
		if r.Code == proc.CodeRunning {
			pending = append(pending, r.Key)
		}
	}
	stack := ""
	if len(pending) > 0 {
		tg, _, _ := proc.ParseResultKey(pending[0])
		if v, err := e.client.QueryWorkflow(qctx, workflows.HostWorkflowID(tg.HostID()), "", "__stack_trace"); err == nil {
			_ = v.Get(&stack)
		}
	}
	t.Fatalf("task %s still running after %s: %d of %d pending (%v)\nfirst one's host workflow:\n%s", task, limit, len(pending), res.Total, pending[:min(5, len(pending))], stack)
}
