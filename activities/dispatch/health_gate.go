package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// HealthGate probes the items at once and then every in.Every until
// MinHealthy has passed, with status probes (they only read). An item
// found dead or unhealthy once is failed and no longer probed. One
// activity for the whole window keeps the rollout's history to a few
// events per batch whatever min_healthy is; a retry after a lost worker
// holds the items for the whole window again.
func (d *Dispatcher) HealthGate(ctx context.Context, in workflows.HealthGateInput) ([]workflows.HealthFailure, error) {
	ctx, outlast := activities.OutlastLostHeartbeats(ctx)
	defer outlast()
	defer activities.KeepAlive(ctx)()
	probe := func(ctx context.Context, items []proc.Item) ([]workflows.HostReply, error) {
		return d.Status(ctx, workflows.StatusInput{TaskID: in.TaskID, Items: items})
	}
	return healthGate(ctx, in, probe, sleepCtx)
}

// healthGate is HealthGate's loop, with its probe and its wait passed in.
func healthGate(ctx context.Context, in workflows.HealthGateInput, probe func(context.Context, []proc.Item) ([]workflows.HostReply, error),
	sleep func(context.Context, time.Duration) error) ([]workflows.HealthFailure, error) {
	failed := map[int]bool{}
	var out []workflows.HealthFailure
	var waited time.Duration
	for {
		var items []proc.Item
		var index []int
		for i, it := range in.Items {
			if !failed[i] {
				items = append(items, it)
				index = append(index, i)
			}
		}
		if len(items) == 0 {
			return out, nil
		}
		replies, err := probe(ctx, items)
		if err != nil {
			return nil, err
		}
		for _, r := range replies {
			if r.Index < 0 || r.Index >= len(index) {
				continue
			}
			if why := unhealthy(r.Result); why != "" {
				failed[index[r.Index]] = true
				out = append(out, workflows.HealthFailure{Index: index[r.Index], Why: why})
			}
		}
		if waited >= in.MinHealthy {
			return out, nil
		}
		step := min(in.Every, in.MinHealthy-waited)
		if err := sleep(ctx, step); err != nil {
			return nil, err
		}
		waited += step
	}
}

// unhealthy says why a status result is not alive and healthy, or "".
func unhealthy(r proc.HostResult) string {
	if r.Code != proc.CodeSuccess {
		return fmt.Sprintf("status answered %d (%s)", int(r.Code), r.Message)
	}
	var c proc.StatusContent
	if json.Unmarshal([]byte(r.Content), &c) != nil || len(c.Process) == 0 || len(c.Process[0].Instance) == 0 {
		return ""
	}
	if c.Process[0].Instance[0].Health != "1" {
		return "health_cmd failed"
	}
	return ""
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
