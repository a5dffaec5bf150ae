package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/hostloss"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/workflows"
)

// ErrTaskNotFound means no workflow has the task id.
var ErrTaskNotFound = errors.New("task not found")

// StartOperate starts the op's workflow under its task id, on the tasks'
// queue of workers that poll taskQueue (policies.TasksQueue). Starting the
// same task id twice is refused by the server, so a retried submission
// never runs an op twice.
func StartOperate(ctx context.Context, c client.Client, taskQueue string, in workflows.OperateInput) error {
	return startOperate(ctx, c, taskQueue, in, nil)
}

// startOperate starts the task with drover's search attributes; on a
// namespace that lacks them (`worker setup` not run) it starts the task
// without them rather than refusing it.
func startOperate(ctx context.Context, c client.Client, taskQueue string, in workflows.OperateInput, memo map[string]any) error {
	taskQueue = policies.TasksQueue(taskQueue)
	if len(in.Items) > policies.ChunkSize {
		return splitTask(ctx, c, taskQueue, in, memo)
	}
	opts := client.StartWorkflowOptions{
		ID:                    in.TaskID,
		TaskQueue:             taskQueue,
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		Memo:                  memo,
	}
	indexed := in
	indexed.Indexed = true
	return startIndexed(ctx, c, opts, taskSearchAttributes(in), workflows.OperateWorkflowName, indexed, in)
}

// startIndexed starts workflow name with search attributes sa and input
// indexed; on a namespace that lacks them it starts it with plain instead.
// A start the server was too busy to answer is tried again; the id a
// timed-out try may have started already counts as started.
func startIndexed(ctx context.Context, c client.Client, opts client.StartWorkflowOptions, sa temporal.SearchAttributes, name string, indexed, plain any) error {
	withSA := opts
	withSA.TypedSearchAttributes = sa
	tries := 0
	return whileBusy(ctx, func(ctx context.Context) error {
		tries++
		_, err := c.ExecuteWorkflow(ctx, withSA, name, indexed)
		var invalid *serviceerror.InvalidArgument
		if errors.As(err, &invalid) && strings.Contains(strings.ToLower(invalid.Error()), "search attribute") {
			_, err = c.ExecuteWorkflow(ctx, opts, name, plain)
		}
		if tries > 1 && hostloss.AlreadyStarted(err) {
			return nil
		}
		return err
	})
}

// TaskMemo summarises a task for the Temporal UI: the API, op, size and who
// asked. It names the operator and the app, never a secret or a token.
func TaskMemo(t *gseapi.Task) map[string]any {
	m := map[string]any{"api": t.API, "op": t.Op.String(), "items": len(t.Items)}
	if t.Caller.Username != "" {
		m["operator"] = t.Caller.Username
	}
	if t.Caller.AppCode != "" {
		m["app"] = t.Caller.AppCode
	}
	return m
}

// WaitOperate blocks until the task's workflow finishes. The wait is a
// long poll that a loaded server can end with an error of its own (its
// internal call cut short: "stream terminated by RST_STREAM") before the
// task ends: such a wait is asked again, as long as ctx lasts.
func WaitOperate(ctx context.Context, c client.Client, taskID string) (workflows.OperateResult, error) {
	for {
		var out workflows.OperateResult
		err := c.GetWorkflow(ctx, taskID, "").Get(ctx, &out)
		if err == nil || ctx.Err() != nil || !waitCutShort(err) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// waitCutShort reports whether a wait failed for the call, not for the
// workflow: anything but the workflow's own failure or an answer that
// asking again cannot change.
func waitCutShort(err error) bool {
	var wee *temporal.WorkflowExecutionError
	var nf *serviceerror.NotFound
	var ia *serviceerror.InvalidArgument
	var pd *serviceerror.PermissionDenied
	var nnf *serviceerror.NamespaceNotFound
	return !errors.As(err, &wee) && !errors.As(err, &nf) && !errors.As(err, &ia) && !errors.As(err, &pd) && !errors.As(err, &nnf)
}

// FetchOperate returns the task's results: final ones when it has finished,
// else progress so far with unfinished hosts at 115. A task split into
// chunks is read chunk by chunk and merged.
func FetchOperate(ctx context.Context, c client.Client, taskID string) (workflows.OperateResult, error) {
	out, err := fetchOne(ctx, c, taskID)
	if err != nil || len(out.Chunks) == 0 {
		return out, err
	}
	merged := workflows.OperateResult{TaskID: out.TaskID, Total: out.Total}
	for n, id := range out.Chunks {
		part, err := fetchOne(ctx, c, id)
		if errors.Is(err, ErrTaskNotFound) {
			// Not started yet: its items are pending, and every key is
			// answered all the same.
			var pending []workflows.KeyedResult
			if _, err := QueryOpen(ctx, c, taskID, workflows.ChunkPendingQuery, &pending, n); err != nil {
				return out, err
			}
			merged.Results = append(merged.Results, pending...)
			continue
		}
		if err != nil {
			return out, err
		}
		merged.Done += part.Done
		merged.Results = append(merged.Results, part.Results...)
	}
	return merged, nil
}

// WaitOperateAll waits for the task and returns every host's result, merged
// across chunks.
func WaitOperateAll(ctx context.Context, c client.Client, taskID string) (workflows.OperateResult, error) {
	if _, err := WaitOperate(ctx, c, taskID); err != nil {
		return workflows.OperateResult{}, err
	}
	return FetchOperate(ctx, c, taskID)
}

func fetchOne(ctx context.Context, c client.Client, taskID string) (workflows.OperateResult, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, taskID, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return workflows.OperateResult{}, fmt.Errorf("%w: %s", ErrTaskNotFound, taskID)
		}
		return workflows.OperateResult{}, err
	}
	var out workflows.OperateResult
	if desc.WorkflowExecutionInfo.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return out, Query(ctx, c, taskID, workflows.ProgressQuery, &out)
	}
	return WaitOperate(ctx, c, taskID)
}
