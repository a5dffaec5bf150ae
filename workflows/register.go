package workflows

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
)

// workflowDefinitions are drover's workflows under their registered names:
// a worker runs them, and the replay tests replay the histories of each.
var workflowDefinitions = []struct {
	Fn   any
	Name string
}{
	{Operate, OperateWorkflowName}, {Host, HostWorkflowName}, {WatchShard, WatchShardWorkflowName},
	{Rollout, RolloutWorkflowName}, {RolloutChunk, RolloutChunkWorkflowName},
}

// workflowRegistry is what takes workflows: a worker, a replayer.
type workflowRegistry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

func registerWorkflows(r workflowRegistry) {
	for _, d := range workflowDefinitions {
		r.RegisterWorkflowWithOptions(d.Fn, workflow.RegisterOptions{Name: d.Name})
	}
}

// Register puts drover's workflows and activities on a worker.
func Register(w worker.Worker, acts *activities.Activities, d *Dispatcher) {
	registerWorkflows(w)
	w.RegisterActivity(acts)
	w.RegisterActivity(d)
}

// RegisterWatch puts supervision's watches on the worker of the watch
// queue: shard watches, and the per-host watches of host workflows begun
// before shards. Register keeps the per-host one on the ops' worker too,
// for host workflows begun before watches had their own queue.
func RegisterWatch(w worker.Worker, acts *activities.Activities) {
	w.RegisterActivityWithOptions(acts.Watch, activity.RegisterOptions{Name: WatchActivity})
	w.RegisterActivityWithOptions(acts.ShardWatch, activity.RegisterOptions{Name: ShardWatchActivity})
}
