package engine

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/workflows"
)

// CancelTask asks a running task to cancel. done reports a task that had
// already finished: there is nothing left to cancel.
func CancelTask(ctx context.Context, c client.Client, taskID string) (done bool, err error) {
	desc, err := c.DescribeWorkflowExecution(ctx, taskID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, fmt.Errorf("%w: %s", ErrTaskNotFound, taskID)
	}
	if err != nil {
		return false, err
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return true, nil
	}
	err = c.SignalWorkflow(ctx, taskID, "", workflows.CancelSignal, nil)
	if errors.As(err, &nf) {
		return true, nil // it finished meanwhile
	}
	return false, err
}
