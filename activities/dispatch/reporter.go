package dispatch

import (
	"context"
	"sync"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/workflows"
)

// reporter sends a Deliver batch's answers to its task as they come.
type reporter struct {
	c    client.Client
	task workflow.Execution
	mu   sync.Mutex
	new  []workflows.HostReply
}

func newReporter(c client.Client, task workflow.Execution) *reporter {
	return &reporter{c: c, task: task}
}

func (r *reporter) add(a workflows.HostReply) {
	r.mu.Lock()
	r.new = append(r.new, a)
	r.mu.Unlock()
}

// run sends what came in, every policies.DeliverReportEvery, until the
// returned stop. A signal that fails is not tried again: the batch's
// result carries every answer anyway.
func (r *reporter) run(ctx context.Context) (stop func()) {
	return activities.Every(ctx, policies.DeliverReportEvery, func() {
		r.mu.Lock()
		batch := r.new
		r.new = nil
		r.mu.Unlock()
		if len(batch) > 0 {
			_ = r.c.SignalWorkflow(ctx, r.task.ID, r.task.RunID, workflows.AnswersSignal, batch)
		}
	})
}
