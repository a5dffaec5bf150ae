package dispatch

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/workflows"
)

// Register puts drover's workflows and activities on a worker: the
// methods of acts and d, each under its own name, which is the name
// workflows schedule it by (workflows/protocol.go).
func Register(w worker.Worker, acts *activities.Activities, d *Dispatcher) {
	workflows.RegisterWorkflows(w)
	w.RegisterActivity(acts)
	w.RegisterActivity(d)
}

// RegisterWatch puts supervision's watches on the worker of the watch
// queue: shard watches, and the per-host watches of host workflows begun
// before shards. Register keeps the per-host one on the ops' worker too,
// for host workflows begun before watches had their own queue.
func RegisterWatch(w worker.Worker, acts *activities.Activities) {
	w.RegisterActivityWithOptions(acts.Watch, activity.RegisterOptions{Name: workflows.WatchActivity})
	w.RegisterActivityWithOptions(acts.ShardWatch, activity.RegisterOptions{Name: workflows.ShardWatchActivity})
}
