package workflows

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// rolloutEnv runs Rollout with its batches' Operate children faked: items
// whose index is in failing fail with 65535. It records each batch's
// offset and size, and the states put in the search attributes.
type rolloutEnv struct {
	*testsuite.TestWorkflowEnvironment
	batches [][2]int
	states  []string
	// recorded is each RolloutChunk workflow's results, by workflow id.
	recorded map[string][]KeyedResult
}

func newRolloutEnv(t *testing.T, failing map[int]bool) *rolloutEnv {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	re := &rolloutEnv{TestWorkflowEnvironment: s.NewTestWorkflowEnvironment(), recorded: map[string][]KeyedResult{}}
	re.RegisterWorkflowWithOptions(Rollout, workflow.RegisterOptions{Name: RolloutWorkflowName})
	re.RegisterWorkflowWithOptions(RolloutChunk, workflow.RegisterOptions{Name: RolloutChunkWorkflowName})
	re.RegisterWorkflowWithOptions(Operate, workflow.RegisterOptions{Name: OperateWorkflowName})
	re.OnWorkflow(RolloutChunkWorkflowName, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in RolloutChunkInput) (OperateResult, error) {
		re.recorded[workflow.GetInfo(ctx).WorkflowExecution.ID] = in.Results
		return OperateResult{}, nil
	})
	re.OnWorkflow(OperateWorkflowName, mock.Anything, mock.Anything).Return(func(_ workflow.Context, in OperateInput) (OperateResult, error) {
		re.batches = append(re.batches, [2]int{in.Offset, len(in.Items)})
		out := OperateResult{TaskID: in.TaskID, Total: len(in.Items), Done: len(in.Items)}
		for i, it := range in.Items {
			r := proc.HostResult{Code: proc.CodeSuccess, Message: "success"}
			if failing[in.Offset+i] {
				r = proc.Fail(proc.CodeCommandFailed, "start command exited 1 with no output")
			}
			out.Results = append(out.Results, KeyedResult{Key: it.Key(), HostResult: r})
		}
		return out, nil
	})
	re.OnUpsertTypedSearchAttributes(mock.Anything).Return(nil).Run(func(args mock.Arguments) {
		// Each batch is an upsert too: keep the changes of state.
		st, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(SARolloutState)
		if ok && (len(re.states) == 0 || re.states[len(re.states)-1] != st) {
			re.states = append(re.states, st)
		}
	})
	return re
}

func rolloutItems(n int) []proc.Item {
	items := make([]proc.Item, n)
	for i := range items {
		items[i] = proc.Item{Target: proc.Target{IP: fmt.Sprintf("10.0.0.%d", i+1)}, Process: proc.ProcessID{Namespace: "ns", Name: "p"}}
	}
	return items
}

// run executes the rollout and returns every host's result, read from the
// chunks its result names, as get_proc_operate_result reads them.
func (re *rolloutEnv) run(t *testing.T, n int, r policies.Rollout) OperateResult {
	t.Helper()
	re.ExecuteWorkflow(RolloutWorkflowName, RolloutInput{OperateInput: OperateInput{TaskID: "GSETASK:1", Op: proc.OpStart, Items: rolloutItems(n), Indexed: true}, Rollout: r})
	if err := re.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res OperateResult
	if err := re.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 0 || res.Done != n || res.Total != n {
		t.Fatalf("the rollout's own result holds %d results, done %d of %d; want only its chunks", len(res.Results), res.Done, res.Total)
	}
	for _, id := range res.Chunks {
		got, ok := re.recorded[id]
		if !ok {
			t.Fatalf("chunk %s was never recorded (chunks %v)", id, res.Chunks)
		}
		res.Results = append(res.Results, got...)
	}
	if len(res.Results) != n {
		t.Fatalf("the chunks hold %d results for %d hosts", len(res.Results), n)
	}
	return res
}

func codes(res OperateResult) []proc.Code {
	out := make([]proc.Code, len(res.Results))
	for i, r := range res.Results {
		out[i] = r.Code
	}
	return out
}

// TestRolloutStopsPastBudget: 20 hosts, canary 1, batches of 5, max_fail
// 2, hosts 2, 3 and 7 failing: the third batch crosses the budget, and
// the 9 hosts after it are never run and answer 9111.
func TestRolloutStopsPastBudget(t *testing.T) {
	re := newRolloutEnv(t, map[int]bool{2: true, 3: true, 7: true})
	res := re.run(t, 20, policies.Rollout{Canary: 1, Batch: policies.Size{Count: 5}, MaxFail: policies.Size{Count: 2}})
	if fmt.Sprint(re.batches) != "[[0 1] [1 5] [6 5]]" {
		t.Fatalf("batches run (offset, size): %v", re.batches)
	}
	for i, c := range codes(res) {
		want := proc.CodeSuccess
		switch {
		case i == 2 || i == 3 || i == 7:
			want = proc.CodeCommandFailed
		case i >= 11:
			want = proc.CodeNotRun
		}
		if c != want {
			t.Fatalf("host %d answers %d, want %d (all: %v)", i, c, want, codes(res))
		}
	}
	if last := re.states[len(re.states)-1]; last != RolloutFailed {
		t.Fatalf("final state %q (states %v), want %q", last, re.states, RolloutFailed)
	}
}

// TestRolloutWaitsForApproval: after the canary the rollout holds, a day
// or more if need be, then runs the rest on approve.
func TestRolloutWaitsForApproval(t *testing.T) {
	re := newRolloutEnv(t, nil)
	var during RolloutStatus
	re.RegisterDelayedCallback(func() {
		v, err := re.QueryWorkflow(RolloutStatusQuery)
		if err != nil {
			t.Error(err)
			return
		}
		_ = v.Get(&during)
		re.SignalWorkflow(RolloutSignal, RolloutApprove)
	}, 30*time.Hour)
	res := re.run(t, 6, policies.Rollout{Canary: 1, Batch: policies.Size{Count: 5}, ApproveAfterCanary: true})
	if during.State != RolloutWaitingApproval || during.Batch != 1 || during.Done != 1 {
		t.Fatalf("status a day after the canary: %+v, want waiting_approval after batch 1 with 1 done", during)
	}
	if fmt.Sprint(re.batches) != "[[0 1] [1 5]]" || fmt.Sprint(codes(res)) != "[0 0 0 0 0 0]" {
		t.Fatalf("batches %v, codes %v", re.batches, codes(res))
	}
	if fmt.Sprint(re.states) != "[running waiting_approval running done]" {
		t.Fatalf("states %v", re.states)
	}
}

// TestRolloutAbortAndPause: a pause holds the rollout before its next
// batch even once approved; an abort ends it, and the hosts it never
// reached answer 9111 saying so.
func TestRolloutAbortAndPause(t *testing.T) {
	re := newRolloutEnv(t, nil)
	var paused RolloutStatus
	re.RegisterDelayedCallback(func() { re.SignalWorkflow(RolloutSignal, RolloutPause) }, time.Minute)
	re.RegisterDelayedCallback(func() { re.SignalWorkflow(RolloutSignal, RolloutApprove) }, 2*time.Minute)
	re.RegisterDelayedCallback(func() {
		v, _ := re.QueryWorkflow(RolloutStatusQuery)
		_ = v.Get(&paused)
		re.SignalWorkflow(RolloutSignal, RolloutAbort)
	}, time.Hour)
	res := re.run(t, 4, policies.Rollout{Canary: 1, Batch: policies.Size{Count: 1}, ApproveAfterCanary: true})
	if paused.State != RolloutPaused || paused.Batch != 1 {
		t.Fatalf("status while paused after approval: %+v", paused)
	}
	if fmt.Sprint(re.batches) != "[[0 1]]" || fmt.Sprint(codes(res)) != "[0 9111 9111 9111]" {
		t.Fatalf("batches %v, codes %v", re.batches, codes(res))
	}
	if msg := res.Results[1].Message; msg != "not run: the rollout was aborted before this host's batch" {
		t.Fatalf("not-run message %q", msg)
	}
	if last := re.states[len(re.states)-1]; last != RolloutAborted {
		t.Fatalf("states %v, want it to end aborted", re.states)
	}
}

// TestRolloutHealthGate: hosts the gate finds dead or unhealthy within
// min_healthy after a successful op count as failed (9110), and spend the
// budget: the next batch never runs.
func TestRolloutHealthGate(t *testing.T) {
	re := newRolloutEnv(t, nil)
	var gated []string
	re.RegisterActivityWithOptions(func(_ context.Context, in HealthGateInput) ([]HealthFailure, error) {
		var out []HealthFailure
		for i, it := range in.Items {
			gated = append(gated, it.Target.IP)
			switch it.Target.IP {
			case "10.0.0.2":
				out = append(out, HealthFailure{Index: i, Why: "status answered 829 (process(p) is not running)"})
			case "10.0.0.3":
				out = append(out, HealthFailure{Index: i, Why: "health_cmd failed"})
			}
		}
		if in.MinHealthy != 30*time.Second || in.Every != 5*time.Second {
			return nil, fmt.Errorf("gate asked for %s every %s", in.MinHealthy, in.Every)
		}
		return out, nil
	}, activity.RegisterOptions{Name: "HealthGate"})
	res := re.run(t, 5, policies.Rollout{Batch: policies.Size{Count: 3}, MaxFail: policies.Size{Count: 1}, MinHealthy: 30 * time.Second})
	if got := codes(res); fmt.Sprint(got) != "[0 9110 9110 9111 9111]" {
		t.Fatalf("codes %v, want the dead and the unhealthy host 9110 and the rest not run", got)
	}
	if msg := res.Results[2].Message; msg != "health_cmd failed within min_healthy 30s after the op" {
		t.Fatalf("message %q", msg)
	}
	if fmt.Sprint(gated) != "[10.0.0.1 10.0.0.2 10.0.0.3]" {
		t.Fatalf("gated %v, want the first batch only", gated)
	}
}

// TestRolloutLargeBatchesSplit: batches larger than ChunkSize run as
// several Operate children, and the result names one chunk per child.
func TestRolloutLargeBatchesSplit(t *testing.T) {
	re := newRolloutEnv(t, nil)
	n := 2*policies.ChunkSize + 203
	res := re.run(t, n, policies.Rollout{Batch: policies.Size{Percent: 50}})
	half := (n + 1) / 2
	want := fmt.Sprint([][2]int{{0, policies.ChunkSize}, {policies.ChunkSize, half - policies.ChunkSize},
		{half, policies.ChunkSize}, {half + policies.ChunkSize, n - half - policies.ChunkSize}})
	// A batch's children run at once: compare them in offset order.
	sort.Slice(re.batches, func(i, j int) bool { return re.batches[i][0] < re.batches[j][0] })
	if fmt.Sprint(re.batches) != want {
		t.Fatalf("children (offset, size) %v, want %s", re.batches, want)
	}
	if fmt.Sprint(res.Chunks) != "[default-test-workflow-id/batch-1-0 default-test-workflow-id/batch-1-1 default-test-workflow-id/batch-2-0 default-test-workflow-id/batch-2-1]" {
		t.Fatalf("chunks %v", res.Chunks)
	}
	for i, r := range res.Results {
		if r.Code != proc.CodeSuccess || r.Key != rolloutItems(n)[i].Key() {
			t.Fatalf("result %d: %s %d", i, r.Key, r.Code)
		}
	}
}
