package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
)

// Register puts drover's workflows and the host activities on a worker.
func Register(w worker.Worker, acts *activities.Activities) {
	w.RegisterWorkflowWithOptions(Operate, workflow.RegisterOptions{Name: OperateWorkflowName})
	w.RegisterActivity(acts)
}
