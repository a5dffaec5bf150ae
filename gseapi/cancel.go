package gseapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// CancelTaskPath is drover's own endpoint beside the GSE ones: GSE has no
// way to cancel a task. Its body is get_proc_operate_result's ({task_id}).
const CancelTaskPath = "/api/v2/proc/drover/cancel_task"

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

// CancelTaskAs cancels a task for a caller: its keys then answer 9109, each
// saying whether its op ran. A task touching a namespace outside the grant
// is refused whole, as its results are.
func CancelTaskAs(ctx context.Context, e Engine, body []byte, g *Grant) (Response, Outcome) {
	q, err := DecodeResultQuery(body)
	if err != nil {
		return Failure(0, err), OutcomeBadRequest
	}
	c, ok := e.(Canceller)
	if !ok {
		return Failure(CodeInternal, errors.New("this engine cannot cancel tasks")), OutcomeUnavailable
	}
	// Only a grant limited to some namespaces needs the task's keys: a
	// split task's results are read chunk by chunk, each a query of a
	// chunk that may be busy with thousands of replies.
	if g != nil && len(g.Namespaces) > 0 {
		if _, refused, outcome, ok := grantedResults(ctx, e, q.TaskID, false, g); !ok {
			return refused, outcome
		}
	}
	done, err := c.Cancel(ctx, q.TaskID)
	switch {
	case errors.Is(err, ErrTaskNotFound):
		return Failure(CodeTaskNotFound, err), OutcomeNotFound
	case err != nil:
		return Failure(CodeUnavailable, err), OutcomeUnavailable
	}
	resp := OK(CancelData{TaskID: q.TaskID, Cancelled: !done})
	if done {
		resp.Message = fmt.Sprintf("task %s had already finished: nothing to cancel", q.TaskID)
	}
	return resp, OutcomeOK
}

// serveCancel answers POST CancelTaskPath, authenticated like every API.
func (g *Gateway) serveCancel(w http.ResponseWriter, r *http.Request) {
	g.serve(w, r, "drover/cancel_task", func() (int, Response, string, string) {
		return g.answerWith(r, func(ctx context.Context, body []byte, grant *Grant) (Response, Outcome) {
			return CancelTaskAs(ctx, g.Engine, body, grant)
		})
	})
}
