package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/drover-sh/drover/workflows"
)

// latestTask is the id of the newest task (not one of its chunks) started
// since began.
func (e *env) latestTask(ctx context.Context, began time.Time) (string, error) {
	q := fmt.Sprintf("WorkflowType = '%s' AND StartTime >= '%s'", workflows.OperateWorkflowName, began.Add(-time.Second).UTC().Format(time.RFC3339Nano))
	resp, err := e.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q})
	if err != nil {
		return "", fmt.Errorf("find the task: %w", err)
	}
	var id string
	var latest time.Time
	for _, ex := range resp.Executions {
		if t := ex.GetStartTime().AsTime(); t.After(latest) && !strings.Contains(ex.Execution.WorkflowId, "/") {
			latest, id = t, ex.Execution.WorkflowId
		}
	}
	if id == "" {
		return "", fmt.Errorf("the task started at %s is not listed", began.Format(time.RFC3339))
	}
	return id, nil
}

func (e *env) history(ctx context.Context, id string) ([]*historypb.HistoryEvent, error) {
	it := e.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// latestRun is the newest task started since began, and its run.
func (e *env) latestRun(ctx context.Context, began time.Time) (string, taskRun, error) {
	id, err := e.latestTask(ctx, began)
	if err != nil {
		return "", taskRun{}, err
	}
	evs, err := e.history(ctx, id)
	if err != nil {
		return "", taskRun{}, err
	}
	return id, taskRunOf(evs), nil
}

// taskRun is a task's run as its history tells it.
type taskRun struct {
	start, end            time.Time
	events, workflowTasks int
	acts                  []actRun
}

// actRun is one activity of a task: its type and when it was scheduled,
// started and completed (zero if it was not).
type actRun struct {
	name                          string
	scheduled, started, completed time.Time
}

func taskRunOf(evs []*historypb.HistoryEvent) taskRun {
	var tr taskRun
	byID := map[int64]int{} // activities by scheduled event id
	for _, ev := range evs {
		tr.events++
		t := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			tr.start = t
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			tr.end = t
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			tr.workflowTasks++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			byID[ev.GetEventId()] = len(tr.acts)
			tr.acts = append(tr.acts, actRun{name: ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName(), scheduled: t})
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if i, ok := byID[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; ok {
				tr.acts[i].started = t
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if i, ok := byID[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]; ok {
				tr.acts[i].completed = t
			}
		}
	}
	return tr
}
