package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/workflows"
)

// StartRollout begins the task as a Rollout workflow under a new task id;
// get_proc_operate_result reads it like any task.
func (e *Engine) StartRollout(ctx context.Context, t *gseapi.Task, r policies.Rollout) (string, error) {
	if err := r.ValidateFor("rollout.", len(t.Items)); err != nil {
		return "", err
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	in := workflows.RolloutInput{OperateInput: workflows.OperateInput{TaskID: gseapi.NewTaskID(now()), Op: t.Op, Items: e.withAccounts(t.Items), Manage: t.Manage}, Rollout: r}
	opts := client.StartWorkflowOptions{
		ID: in.TaskID, TaskQueue: e.TaskQueue, Memo: TaskMemo(t),
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
	indexed := in
	indexed.Indexed = true
	sa := temporal.NewSearchAttributes(append(taskSearchUpdates(in.OperateInput),
		workflows.SARolloutState.ValueSet(workflows.RolloutRunning), workflows.SARolloutBatch.ValueSet(0))...)
	if err := startIndexed(ctx, e.Client, opts, sa, workflows.RolloutWorkflowName, indexed, in); err != nil {
		return "", fmt.Errorf("%w: %v", gseapi.ErrUnavailable, err)
	}
	return in.TaskID, nil
}

// ControlRollout signals a running rollout: pause, resume, approve or abort.
func (e *Engine) ControlRollout(ctx context.Context, taskID, action string) error {
	if !slices.Contains(workflows.RolloutActions, action) {
		return fmt.Errorf("%w: action %q is not one of pause, resume, approve, abort", gseapi.ErrNotRollout, action)
	}
	if err := e.rolloutRunning(ctx, taskID); err != nil {
		return err
	}
	return e.Client.SignalWorkflow(ctx, taskID, "", workflows.RolloutSignal, action)
}

// RolloutStatus returns a rollout's state and counts, ended or not.
func (e *Engine) RolloutStatus(ctx context.Context, taskID string) (any, error) {
	if _, err := e.describeRollout(ctx, taskID); err != nil {
		return nil, err
	}
	var st workflows.RolloutStatus
	return st, Query(ctx, e.Client, taskID, workflows.RolloutStatusQuery, &st)
}

func (e *Engine) rolloutRunning(ctx context.Context, taskID string) error {
	status, err := e.describeRollout(ctx, taskID)
	if err != nil {
		return err
	}
	if status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Errorf("%w: rollout %s has ended", gseapi.ErrNotRollout, taskID)
	}
	return nil
}

func (e *Engine) describeRollout(ctx context.Context, taskID string) (enums.WorkflowExecutionStatus, error) {
	desc, err := e.Client.DescribeWorkflowExecution(ctx, taskID, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return 0, fmt.Errorf("%w: %s", gseapi.ErrTaskNotFound, taskID)
	case err != nil:
		return 0, fmt.Errorf("%w: %v", gseapi.ErrUnavailable, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetType().GetName() != workflows.RolloutWorkflowName {
		return 0, fmt.Errorf("%w: task %s is a plain op, not a rollout", gseapi.ErrNotRollout, taskID)
	}
	return info.GetStatus(), nil
}
