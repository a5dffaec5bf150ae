package workflows

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/proc"
)

// hostTest is a Host workflow under the test suite (skipped clock), with
// HostOp answered by run and the replies to "task" recorded by index.
type hostTest struct {
	env     *testsuite.TestWorkflowEnvironment
	start   time.Time
	mu      sync.Mutex
	ran     []string // request ids HostOp ran, in order
	ins     []activities.HostOpInput
	replies map[int]proc.HostResult
}

func newHostTest(t *testing.T, run func(ctx context.Context, in activities.HostOpInput) (activities.HostOpOutput, error)) *hostTest {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	ht := &hostTest{env: s.NewTestWorkflowEnvironment(), replies: map[int]proc.HostResult{},
		start: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	ht.env.SetStartTime(ht.start)
	ht.env.RegisterWorkflowWithOptions(Host, workflow.RegisterOptions{Name: HostWorkflowName})
	ht.env.RegisterActivityWithOptions(func(ctx context.Context, in activities.HostOpInput) (activities.HostOpOutput, error) {
		ht.mu.Lock()
		ht.ran = append(ht.ran, in.RequestID)
		ht.ins = append(ht.ins, in)
		ht.mu.Unlock()
		return run(ctx, in)
	}, activity.RegisterOptions{Name: "HostOp"})
	ht.env.OnSignalExternalWorkflow(mock.Anything, "task", "", ReplySignal, mock.Anything).Return(nil).Run(func(args mock.Arguments) {
		r := args.Get(4).(HostReply)
		ht.mu.Lock()
		ht.replies[r.Index] = r.Result
		ht.mu.Unlock()
	})
	return ht
}

// send delivers req to the host at offset after the start: by update, as
// tasks do, or by signal with a reply to "task" when req has ReplyTo, as
// tasks begun before updates did.
func (ht *hostTest) send(at time.Duration, req HostRequest) {
	if req.ReplyTo != "" {
		ht.env.RegisterDelayedCallback(func() { ht.env.SignalWorkflow(OpSignal, req) }, at)
		return
	}
	ht.env.RegisterDelayedCallback(func() {
		ht.env.UpdateWorkflow(OpUpdate, req.RequestID, &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { ht.answer(req.Index, nil, err) },
			OnAccept:   func() {},
			OnComplete: func(v any, err error) { ht.answer(req.Index, v, err) },
		}, req)
	}, at)
}

// answer records an update's outcome as the host's reply.
func (ht *hostTest) answer(index int, v any, err error) {
	ht.mu.Lock()
	defer ht.mu.Unlock()
	var r proc.HostResult
	if err == nil {
		b, _ := json.Marshal(v)
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		r = proc.HostResult{Code: proc.CodeInternal, Message: "update failed: " + err.Error()}
	}
	ht.replies[index] = r
}

// signalled is req sent as tasks begun before updates sent it.
func signalled(req HostRequest) HostRequest {
	req.ReplyTo = "task"
	return req
}

func (ht *hostTest) run() {
	ht.env.ExecuteWorkflow(HostWorkflowName, HostState{Host: proc.HostID{IP: "10.0.0.1"}})
}

func succeed(context.Context, activities.HostOpInput) (activities.HostOpOutput, error) {
	return activities.HostOpOutput{Result: proc.HostResult{Code: proc.CodeSuccess, Message: "success"}}, nil
}

func startRequest(id string, index int, name string) HostRequest {
	spec := proc.Spec{ProcName: name, SetupPath: "/data/" + name, PidPath: "/data/" + name + "/" + name + ".pid"}
	return HostRequest{RequestID: id, Index: index, Op: proc.OpStart,
		Target: proc.Target{IP: "10.0.0.1"}, Process: proc.ProcessID{Namespace: "ns", Name: name}, Spec: &spec}
}

// TestHostRequestPastItsDeadlineIsNotRun: a request dequeued after its
// deadline answers 9105 "not run" and no HostOp runs for it; one still in
// time runs; one without a deadline (sent before deadlines existed) runs.
func TestHostRequestPastItsDeadlineIsNotRun(t *testing.T) {
	ht := newHostTest(t, succeed)
	late := startRequest("late#0", 0, "a")
	late.Deadline = ht.start.Add(time.Second)
	inTime := startRequest("ok#1", 1, "b")
	inTime.Deadline = ht.start.Add(time.Minute)
	old := startRequest("old#2", 2, "c")
	ht.send(2*time.Second, late)
	ht.send(3*time.Second, inTime)
	ht.send(4*time.Second, old)
	ht.run()

	if r := ht.replies[0]; r.Code != proc.CodeTimeout || !strings.Contains(r.Message, "not run: deadline passed") {
		t.Fatalf("late request: %+v, want 9105 not run", r)
	}
	for i := 1; i <= 2; i++ {
		if r := ht.replies[i]; r.Code != proc.CodeSuccess {
			t.Fatalf("request %d: %+v, want it run", i, r)
		}
	}
	if strings.Join(ht.ran, ",") != "ok#1,old#2" {
		t.Fatalf("HostOp ran %v, want ok#1 and old#2 only", ht.ran)
	}
}

// TestHostAnswersARequestSentAgainFromWhatItKept: a request sent again
// after the run that took it ended (the host continued as new, and the
// server knows update ids only within a run) is answered what the host
// kept, and not run again.
func TestHostAnswersARequestSentAgainFromWhatItKept(t *testing.T) {
	ht := newHostTest(t, succeed)
	kept := proc.Fail(proc.CodePostCheck, "start process (a) failed, for post-check status not alive")
	ht.send(time.Second, startRequest("T#0", 0, "a"))
	ht.send(2*time.Second, startRequest("T#1", 1, "b"))
	ht.env.ExecuteWorkflow(HostWorkflowName, HostState{Host: proc.HostID{IP: "10.0.0.1"},
		Seen: []string{"T#0"}, Answers: []Answer{{ID: "T#0", Result: kept}}})
	if r := ht.replies[0]; r.Code != kept.Code || r.Message != kept.Message {
		t.Fatalf("request sent again: %+v, want the kept answer %+v", r, kept)
	}
	if r := ht.replies[1]; r.Code != proc.CodeSuccess {
		t.Fatalf("a new request: %+v, want it run", r)
	}
	if got := strings.Join(ht.ran, ","); got != "T#1" {
		t.Fatalf("HostOp ran %s, want T#1 only", got)
	}
}
