package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestDeadlineQueuedRequestNeverRunsLate queues a start behind a start that
// hangs until its op_timeout (150 s) on the same host. The queued start's
// deadline is 2 min 17 s (policies.DeliveryAllowance, and its own bound:
// op_timeout 1 s, start check 1 s, 15 s margin), so it is dequeued past it: it answers 9105 "not run: deadline
// passed", and its start_cmd never ran (its start log stays empty, read
// after the answer came, which is the marker that it was dequeued).
func TestDeadlineQueuedRequestNeverRunsLate(t *testing.T) {
	// Beside the suite's other parallel tests: it waits over 2 minutes for a deadline and does little.
	t.Parallel()
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "late")
	if _, err := h.Exec("mkdir -p /data/hung"); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	hung := proc.Spec{ProcName: "hung", SetupPath: "/data/hung", PidPath: "/data/hung/hung.pid",
		StartCmd: "echo began >> /data/hung/ran.log; exec sleep 600", OpTimeout: 150 * time.Second}
	late := appSpec("late")
	late.OpTimeout, late.StartCheck = time.Second, time.Second
	target := proc.Target{IP: h.IP}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	first := workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStart,
		Items: []proc.Item{{Target: target, Process: proc.ProcessID{Namespace: "dl", Name: "hung"}, Spec: &hung}}}
	if err := engine.StartOperate(ctx, e.client, e.cfg.TaskQueue, first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the hung start_cmd under way", func() bool {
		out, _ := h.Exec("cat /data/hung/ran.log 2>/dev/null || true")
		return strings.Contains(out, "began")
	})
	second := workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStart,
		Items: []proc.Item{{Target: target, Process: proc.ProcessID{Namespace: "dl", Name: "late"}, Spec: &late}}}
	if err := engine.StartOperate(ctx, e.client, e.cfg.TaskQueue, second); err != nil {
		t.Fatal(err)
	}
	late2, err := engine.WaitOperateAll(ctx, e.client, second.TaskID)
	if err != nil || len(late2.Results) != 1 {
		t.Fatalf("the queued start: %+v %v", late2, err)
	}
	r := late2.Results[0].HostResult
	wantCode(t, "a start dequeued past its deadline", r, proc.CodeTimeout)
	if !strings.Contains(r.Message, "not run: deadline passed") {
		t.Fatalf("message %q does not say it was not run", r.Message)
	}
	if n := startsLogged(t, h, "late"); n != 0 {
		t.Fatalf("the late start ran start_cmd %d times, want never", n)
	}
	res, err := engine.WaitOperateAll(ctx, e.client, first.TaskID)
	if err != nil || len(res.Results) != 1 {
		t.Fatalf("the hung start: %+v %v", res, err)
	}
	wantCode(t, "the hung start", res.Results[0].HostResult, proc.CodeTimeout)
	if strings.Contains(res.Results[0].Message, "not run") {
		t.Fatalf("the hung start ran, yet says %q", res.Results[0].Message)
	}
}
