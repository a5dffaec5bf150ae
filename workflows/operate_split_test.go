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
