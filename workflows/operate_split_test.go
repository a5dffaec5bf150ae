package workflows

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// TestSplitTaskKeepsCountsOnly: a task the client split waits for each of
// its chunks by id, holds their counts and never their results, and records
// its outcome from them.
func TestSplitTaskKeepsCountsOnly(t *testing.T) {
	env := operateEnv(t)
	total := 2*policies.ChunkSize + 7
	var mu sync.Mutex
	awaited := map[string]int{}
	env.RegisterActivityWithOptions(func(_ context.Context, in AwaitChunkInput) (ChunkCounts, error) {
		mu.Lock()
		awaited[in.ID] = in.Total
		mu.Unlock()
		c := ChunkCounts{ID: in.ID, Total: in.Total, Done: in.Total, Finished: true}
		if in.ID == "GSETASK:S/chunk-2" {
			c.Failed = 3
		}
		return c, nil
	}, activity.RegisterOptions{Name: "AwaitChunk"})
	var outcome string
	var failed int64
	env.OnUpsertTypedSearchAttributes(mock.Anything).Return(nil).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		outcome, _ = sa.GetKeyword(SAOutcome)
		failed, _ = sa.GetInt64(SAFailedHost)
	})
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:S", Op: proc.OpStart, Split: 3, Total: total, Indexed: true})
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"GSETASK:S/chunk-0": policies.ChunkSize, "GSETASK:S/chunk-1": policies.ChunkSize, "GSETASK:S/chunk-2": 7}
	if len(awaited) != len(want) {
		t.Fatalf("awaited %v, want %v", awaited, want)
	}
	for id, n := range want {
		if awaited[id] != n {
			t.Fatalf("awaited %v, want %v", awaited, want)
		}
	}
	if res.Total != total || res.Done != total || res.Failed != 3 || len(res.Results) != 0 || len(res.Chunks) != 3 || res.Chunks[2] != "GSETASK:S/chunk-2" {
		t.Fatalf("result %+v", res)
	}
	if outcome != OutcomeFailed || failed != 3 {
		t.Fatalf("outcome %q failed %d, want %q 3", outcome, failed, OutcomeFailed)
	}
}

// TestSplitTaskCountsAChunkThatFailedWhole: a chunk whose wait fails (its
// workflow gone) counts each of its items done and failed, so the task
// still ends and says so.
func TestSplitTaskCountsAChunkThatFailedWhole(t *testing.T) {
	env := operateEnv(t)
	env.RegisterActivityWithOptions(func(_ context.Context, in AwaitChunkInput) (ChunkCounts, error) {
		if in.ID == "GSETASK:S/chunk-1" {
			return ChunkCounts{}, temporal.NewNonRetryableApplicationError("chunk not found", ErrChunkNotFound, errors.New("gone"))
		}
		return ChunkCounts{ID: in.ID, Total: in.Total, Done: in.Total, Finished: true}, nil
	}, activity.RegisterOptions{Name: "AwaitChunk"})
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:S", Op: proc.OpStop, Split: 2, Total: policies.ChunkSize + 1})
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Done != policies.ChunkSize+1 || res.Failed != 1 {
		t.Fatalf("done %d failed %d, want %d and 1", res.Done, res.Failed, policies.ChunkSize+1)
	}
}

// TestSplitTaskCancelReachesEveryRunningChunk: a cancel of a split task is
// signalled to each chunk still running, by its workflow id, and not to one
// that has finished.
func TestSplitTaskCancelReachesEveryRunningChunk(t *testing.T) {
	env := operateEnv(t)
	release := make(chan struct{})
	env.RegisterActivityWithOptions(func(ctx context.Context, in AwaitChunkInput) (ChunkCounts, error) {
		if in.ID != "GSETASK:C/chunk-0" {
			select {
			case <-release:
			case <-ctx.Done():
				return ChunkCounts{}, ctx.Err()
			}
		}
		return ChunkCounts{ID: in.ID, Total: in.Total, Done: in.Total, Finished: true}, nil
	}, activity.RegisterOptions{Name: "AwaitChunk"})
	var mu sync.Mutex
	var cancelled []string
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", CancelSignal, mock.Anything).Return(nil).Run(func(args mock.Arguments) {
		mu.Lock()
		defer mu.Unlock()
		cancelled = append(cancelled, args.String(1))
		if len(cancelled) == 2 {
			close(release)
		}
	})
	var counts Counts
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(CountsQuery)
		if err == nil {
			err = v.Get(&counts)
		}
		if err != nil {
			t.Error(err)
		}
		env.SignalWorkflow(CancelSignal, nil)
	}, 2*time.Second)
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:C", Op: proc.OpRestart, Split: 3, Total: 2*policies.ChunkSize + 1})
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	sort.Strings(cancelled) // the test environment delivers them in any order
	if len(cancelled) != 2 || cancelled[0] != "GSETASK:C/chunk-1" || cancelled[1] != "GSETASK:C/chunk-2" {
		t.Fatalf("cancel signalled to %v, want chunk-1 and chunk-2", cancelled)
	}
	if counts.Total != 2*policies.ChunkSize+1 || counts.Done != policies.ChunkSize || len(counts.Chunks) != 3 || !counts.Chunks[0].Finished || counts.Chunks[1].Finished {
		t.Fatalf("counts while running: %+v", counts)
	}
	if res.Done != res.Total {
		t.Fatalf("result %+v", res)
	}
}

// TestSplitTaskTakesAChunksSignalAheadOfItsWait: a chunk's own signal of
// its counts finishes it for its task, so a wait whose completion the
// server lost never holds the task open.
func TestSplitTaskTakesAChunksSignalAheadOfItsWait(t *testing.T) {
	env := operateEnv(t)
	lost := make(chan struct{})
	defer close(lost)
	env.RegisterActivityWithOptions(func(ctx context.Context, in AwaitChunkInput) (ChunkCounts, error) {
		if in.ID == "GSETASK:L/chunk-1" {
			select {
			case <-lost:
			case <-ctx.Done():
			}
			return ChunkCounts{}, errors.New("this wait's completion never reaches the task")
		}
		return ChunkCounts{ID: in.ID, Total: in.Total, Done: in.Total, Finished: true}, nil
	}, activity.RegisterOptions{Name: "AwaitChunk"})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(ChunkEndedSignal, ChunkCounts{ID: "GSETASK:L/chunk-1", Total: 9, Done: 9, Failed: 2, Finished: true})
	}, time.Second)
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:L", Op: proc.OpRestart, Split: 2, Total: policies.ChunkSize + 9})
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Done != policies.ChunkSize+9 || res.Failed != 2 {
		t.Fatalf("done %d failed %d, want %d and 2 (chunk-1's signal)", res.Done, res.Failed, policies.ChunkSize+9)
	}
}

// TestSplitChunkTellsItsTask: a chunk of a split task signals its counts
// to the task, by the task's id, before it ends.
func TestSplitChunkTellsItsTask(t *testing.T) {
	env := operateEnv(t)
	items := []proc.Item{
		{Target: proc.Target{IP: "10.0.0.1"}, Process: proc.ProcessID{Namespace: "ns", Name: "p"}},
		{Target: proc.Target{IP: "10.0.0.2"}, Process: proc.ProcessID{Namespace: "ns", Name: "p"}},
	}
	env.RegisterActivityWithOptions(func(_ context.Context, in DeliverInput) ([]HostReply, error) {
		out := answerAll(in)
		out[len(out)-1].Result = proc.Fail(proc.CodeNotRunning, "not running")
		return out, nil
	}, activity.RegisterOptions{Name: "Deliver"})
	var told []ChunkCounts
	env.OnSignalExternalWorkflow(mock.Anything, "GSETASK:T", "", ChunkEndedSignal, mock.Anything).Return(nil).Run(func(args mock.Arguments) {
		told = append(told, args.Get(4).(ChunkCounts))
	})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "GSETASK:T/chunk-3"})
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:T", Op: proc.OpStop, Items: items, Offset: 3 * policies.ChunkSize, Total: 3*policies.ChunkSize + 2})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	want := ChunkCounts{ID: "GSETASK:T/chunk-3", Total: 2, Done: 2, Failed: 1, Finished: true}
	if len(told) != 1 || told[0] != want {
		t.Fatalf("told the task %+v, want once %+v", told, want)
	}
}
