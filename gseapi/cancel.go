package gseapi

import (
	"context"
	"errors"
	"fmt"
)

// Canceller is an Engine that can cancel a task. done reports a task that
// had already finished.
type Canceller interface {
	Cancel(ctx context.Context, taskID string) (done bool, err error)
}

// CancelData is cancel_task's answer: cancelled is false when the task had
// already finished, and nothing was left to cancel.
type CancelData struct {
	TaskID    string `json:"task_id"`
	Cancelled bool   `json:"cancelled"`
}

// cancelQuery decodes cancel_task: its keys then answer 9109, each saying
// whether its op ran. A task touching a namespace outside the grant is
// refused whole, as its results are.
func cancelQuery(body []byte) (query, error) {
	q, err := DecodeResultQuery(body)
	if err != nil {
		return query{}, err
	}
	return query{answer: func(ctx context.Context, e Engine, g *Grant) (Response, Outcome) {
		return cancelTask(ctx, e, q.TaskID, g)
	}}, nil
}

func cancelTask(ctx context.Context, e Engine, taskID string, g *Grant) (Response, Outcome) {
	c, ok := e.(Canceller)
	if !ok {
		return Failure(CodeInternal, errors.New("this engine cannot cancel tasks")), OutcomeUnavailable
	}
	// Only a grant limited to some namespaces needs the task's keys: a
	// split task's results are read chunk by chunk, each a query of a
	// chunk that may be busy with thousands of replies.
	if g != nil && len(g.Namespaces) > 0 {
		if _, refused, outcome, ok := grantedResults(ctx, e, taskID, false, g); !ok {
			return refused, outcome
		}
	}
	done, err := c.Cancel(ctx, taskID)
	switch {
	case errors.Is(err, ErrTaskNotFound):
		return Failure(CodeTaskNotFound, err), OutcomeNotFound
	case err != nil:
		return Failure(CodeUnavailable, err), OutcomeUnavailable
	}
	resp := OK(CancelData{TaskID: taskID, Cancelled: !done})
	if done {
		resp.Message = fmt.Sprintf("task %s had already finished: nothing to cancel", taskID)
	}
	return resp, OutcomeOK
}
