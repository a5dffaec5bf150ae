// Package hostloss handles a host whose workflow is closed: the answer an
// op on it gets, and the two ways back, restore and forget.
package hostloss

import (
	"context"
	"errors"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// A host workflow never ends on its own: it only continues as new. One that
// is closed was terminated, failed or cancelled, and its registry and
// supervision stopped with it. Starting an empty one in its place would
// leave its processes running unsupervised and make every later op answer
// 9106, so drover refuses to, and names the ways back instead.

// ErrLost means a host's workflow is closed: restore or forget it.
var ErrLost = errors.New("host workflow closed")

// Error says which host workflow is closed and how it ended.
type Error struct {
	Host   proc.HostID
	Status enums.WorkflowExecutionStatus
}

func (e *Error) Error() string {
	return Answer(e.Host, e.Status).Message
}

func (e *Error) Unwrap() error { return ErrLost }

// Answer is the answer of an op on a host whose workflow is closed.
func Answer(h proc.HostID, status enums.WorkflowExecutionStatus) proc.HostResult {
	how := strings.ToLower(strings.TrimPrefix(status.String(), "WorkflowExecutionStatus"))
	return proc.Fail(proc.CodeHostLost,
		"host workflow %s was %s: its registry and supervision are stopped and nothing was run; "+
			"bring them back with `starter host restore %s`, or start the host over empty with `starter host forget %s`",
		workflows.HostWorkflowID(h), how, h, h)
}

// Closed describes a host workflow that could not be started because
// one with its id exists: the answer for an op on it when it is closed, nil
// when it is running (it continued as new, or was restored, meanwhile).
func Closed(ctx context.Context, c client.Client, h proc.HostID) (*proc.HostResult, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, workflows.HostWorkflowID(h), "")
	if err != nil {
		return nil, err
	}
	status := desc.GetWorkflowExecutionInfo().GetStatus()
	if status == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, nil
	}
	r := Answer(h, status)
	return &r, nil
}

// AlreadyStarted reports whether a start was refused because a workflow
// with that id exists (running or, under REJECT_DUPLICATE, closed).
func AlreadyStarted(err error) bool {
	var as *serviceerror.WorkflowExecutionAlreadyStarted
	return errors.As(err, &as)
}

// Restore brings back a closed host workflow with its registry and
// supervision: the last run is reset to its last completed workflow task,
// which Temporal allows on a terminated or failed run. The new run replays
// the old one's history, so it holds the registry as it was, and resumes
// supervising. It returns the new run's id.
func Restore(ctx context.Context, c client.Client, namespace string, h proc.HostID) (string, error) {
	id := workflows.HostWorkflowID(h)
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return "", fmt.Errorf("host %s has no workflow to restore: its first op starts one", h)
	}
	if err != nil {
		return "", err
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return "", fmt.Errorf("host workflow %s is running: nothing to restore", id)
	}
	run := info.GetExecution().GetRunId()
	last, err := lastCompletedTask(ctx, c, id, run)
	if err != nil {
		return "", err
	}
	if last == 0 {
		return "", fmt.Errorf("host workflow %s (run %s) never completed a workflow task: nothing to restore; start it over with `starter host forget %s`", id, run, h)
	}
	resp, err := c.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 namespace,
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: id, RunId: run},
		Reason:                    "starter host restore",
		WorkflowTaskFinishEventId: last,
		RequestId:                 id + "/restore/" + run,
	})
	if err != nil {
		return "", fmt.Errorf("reset %s: %w", id, err)
	}
	return resp.GetRunId(), nil
}

// lastCompletedTask is the event id of a run's last completed workflow
// task, 0 when it has none.
func lastCompletedTask(ctx context.Context, c client.Client, id, run string) (int64, error) {
	it := c.GetWorkflowHistory(ctx, id, run, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var last int64
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return 0, fmt.Errorf("history of %s: %w", id, err)
		}
		if ev.GetEventType() == enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			last = ev.GetEventId()
		}
	}
	return last, nil
}

// ErrRunning means forget was asked of a running host workflow without
// the confirmation that its registry may go.
var ErrRunning = errors.New("host workflow is running")

// Forget deliberately starts a host over with an empty registry: a
// closed workflow is replaced by a new empty run; a running one is
// terminated first, and only when terminate is set, since its registry and
// supervision go with it (the processes themselves keep running, no longer
// supervised). A host with no workflow gets an empty one.
func Forget(ctx context.Context, c client.Client, taskQueue string, h proc.HostID, terminate bool) (string, error) {
	id := workflows.HostWorkflowID(h)
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return "", err
	case desc.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
		if !terminate {
			return "", fmt.Errorf("%w: %s holds the registry and supervision of %s; forgetting drops them (its processes keep running, unsupervised): confirm with --yes", ErrRunning, id, h)
		}
		if err := c.TerminateWorkflow(ctx, id, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "starter host forget"); err != nil {
			return "", fmt.Errorf("terminate %s: %w", id, err)
		}
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: taskQueue,
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, workflows.HostWorkflowName, workflows.NewHostState(h, workflows.Supervision{}))
	if err != nil {
		return "", fmt.Errorf("start %s: %w", id, err)
	}
	return run.GetRunID(), nil
}
