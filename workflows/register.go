package workflows

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
)

// Register puts drover's workflows and activities on a worker.
func Register(w worker.Worker, acts *activities.Activities, d *Dispatcher) {
	w.RegisterWorkflowWithOptions(Operate, workflow.RegisterOptions{Name: OperateWorkflowName})
	w.RegisterWorkflowWithOptions(Host, workflow.RegisterOptions{Name: HostWorkflowName})
	w.RegisterWorkflowWithOptions(WatchShard, workflow.RegisterOptions{Name: WatchShardWorkflowName})
	w.RegisterWorkflowWithOptions(Rollout, workflow.RegisterOptions{Name: RolloutWorkflowName})
	w.RegisterWorkflowWithOptions(RolloutChunk, workflow.RegisterOptions{Name: RolloutChunkWorkflowName})
	w.RegisterActivity(acts)
	w.RegisterActivity(d)
}

// RegisterWatch puts supervision's watches on the worker of the watch
// queue: shard watches, and the per-host watches of host workflows begun
// before shards. Register keeps the per-host one on the ops' worker too,
// for host workflows begun before watches had their own queue.
func RegisterWatch(w worker.Worker, acts *activities.Activities) {
	w.RegisterActivityWithOptions(acts.Watch, activity.RegisterOptions{Name: "Watch"})
	w.RegisterActivityWithOptions(acts.ShardWatch, activity.RegisterOptions{Name: "ShardWatch"})
}
