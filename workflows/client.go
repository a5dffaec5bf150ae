package workflows

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// ErrTaskNotFound means no workflow has the task id.
var ErrTaskNotFound = errors.New("task not found")

// StartOperate starts the op's workflow under its task id. Starting the same
// task id twice is refused by the server, so a retried submission never runs
// an op twice.
func StartOperate(ctx context.Context, c client.Client, taskQueue string, in OperateInput) error {
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       in.TaskID,
		TaskQueue:                taskQueue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionTimeout: 0,
	}, OperateWorkflowName, in)
	return err
}

// WaitOperate blocks until the task's workflow finishes.
func WaitOperate(ctx context.Context, c client.Client, taskID string) (OperateResult, error) {
	var out OperateResult
	err := c.GetWorkflow(ctx, taskID, "").Get(ctx, &out)
	return out, err
}

// FetchOperate returns the task's results: final ones when it has finished,
// else progress so far with unfinished hosts at 115.
func FetchOperate(ctx context.Context, c client.Client, taskID string) (OperateResult, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, taskID, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return OperateResult{}, fmt.Errorf("%w: %s", ErrTaskNotFound, taskID)
		}
		return OperateResult{}, err
	}
	var out OperateResult
	if desc.WorkflowExecutionInfo.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		v, err := c.QueryWorkflow(ctx, taskID, "", ProgressQuery)
		if err != nil {
			return out, err
		}
		return out, v.Get(&out)
	}
	return WaitOperate(ctx, c, taskID)
}
