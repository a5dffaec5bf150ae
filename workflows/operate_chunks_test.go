package workflows

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// largeItems is n items on n hosts.
func largeItems(n int) []proc.Item {
	items := make([]proc.Item, n)
	for i := range items {
		items[i] = proc.Item{Target: proc.Target{IP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}, Process: proc.ProcessID{Namespace: "ns", Name: "p"}}
	}
	return items
}

// TestDirectLargeOperateRunsInChunks: an Operate of more than ChunkSize
// items started directly, not through the client's split, runs its items
// as child chunks of at most ChunkSize each, which hand them to their
// hosts by Deliver; it ends with every item done, lists its chunks and
// records its outcome from their results.
func TestDirectLargeOperateRunsInChunks(t *testing.T) {
	env := operateEnv(t)
	n := 2*policies.ChunkSize + 3
	items := largeItems(n)
	var mu sync.Mutex
	delivered := map[int]int{}
	env.RegisterActivityWithOptions(func(_ context.Context, in DeliverInput) ([]HostReply, error) {
		out := answerAll(in)
		mu.Lock()
		defer mu.Unlock()
		for i, idx := range in.Indexes {
			delivered[idx]++
			if items[idx].Key() != in.Items[i].Key() {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("item %d is %s, want %s", idx, in.Items[i].Key(), items[idx].Key()), "test", nil)
			}
			if idx == n-1 {
				out[i].Result = proc.Fail(proc.CodeNotRunning, "process(p) is not running")
			}
		}
		return out, nil
	}, activity.RegisterOptions{Name: DeliverActivity})
	var outcome string
	var failed int64
	env.OnUpsertTypedSearchAttributes(mock.Anything).Return(nil).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		outcome, _ = sa.GetKeyword(SAOutcome)
		failed, _ = sa.GetInt64(SAFailedHost)
	})
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:L", Op: proc.OpStart, Items: items, Indexed: true})
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Done != n || res.Total != n || res.Failed != 1 || len(res.Results) != 0 || len(res.Chunks) != 3 {
		t.Fatalf("done %d of %d, %d failed, %d results, chunks %v; want all done, 1 failed, 3 chunks and no results", res.Done, res.Total, res.Failed, len(res.Results), res.Chunks)
	}
	if len(delivered) != n {
		t.Fatalf("%d items delivered, want %d", len(delivered), n)
	}
	for idx, times := range delivered {
		if times != 1 {
			t.Fatalf("item %d delivered %d times", idx, times)
		}
	}
	if outcome != OutcomeFailed || failed != 1 {
		t.Fatalf("outcome %q failed %d, want %q 1", outcome, failed, OutcomeFailed)
	}
}

// TestDirectLargeOperateCancelReachesItsChunks: a cancel of such a task is
// forwarded to each of its chunks, each of which hands it to its hosts.
func TestDirectLargeOperateCancelReachesItsChunks(t *testing.T) {
	env := operateEnv(t)
	n := policies.ChunkSize + 1
	var mu sync.Mutex
	var cancels []HostCancel
	release := make(chan struct{})
	env.RegisterActivityWithOptions(func(_ context.Context, in CancelHostsInput) error {
		mu.Lock()
		defer mu.Unlock()
		cancels = append(cancels, in.Cancels...)
		if len(cancels) == n {
			close(release)
		}
		return nil
	}, activity.RegisterOptions{Name: CancelHostsActivity})
	env.RegisterActivityWithOptions(func(ctx context.Context, in DeliverInput) ([]HostReply, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		out := answerAll(in)
		for i := range out {
			out[i].Result = proc.Fail(proc.CodeCancelled, "cancelled: not run")
		}
		return out, nil
	}, activity.RegisterOptions{Name: DeliverActivity})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(CancelSignal, nil) }, time.Second)
	env.ExecuteWorkflow(OperateWorkflowName, OperateInput{TaskID: "GSETASK:C", Op: proc.OpRestart, Items: largeItems(n)})
	var res OperateResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(cancels) != n || res.Done != n || res.Failed != n {
		t.Fatalf("%d cancels handed to hosts, done %d, failed %d; want %d of each", len(cancels), res.Done, res.Failed, n)
	}
}
