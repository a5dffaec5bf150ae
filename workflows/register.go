package workflows

import (
	"go.temporal.io/sdk/workflow"
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

// WorkflowRegistry is what takes workflows: a worker, a replayer.
type WorkflowRegistry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// RegisterWorkflows puts drover's workflows on r under their names. A
// worker's activities are registered by dispatch.Register.
func RegisterWorkflows(r WorkflowRegistry) {
	for _, d := range workflowDefinitions {
		r.RegisterWorkflowWithOptions(d.Fn, workflow.RegisterOptions{Name: d.Name})
	}
}
