package gseapi

import (
	"context"
	"errors"
	"time"

	"github.com/drover-sh/drover/proc"
)

// Engine runs tasks; the workflow client implements it.
type Engine interface {
	// Start begins the task and returns its task id.
	Start(ctx context.Context, t *Task) (string, error)
	// Results returns every item's result so far (pending ones 115)
	// under its v1 key, with the agent id it was named by; with wait it
	// first waits for the task to finish.
	Results(ctx context.Context, taskID string, wait bool) ([]proc.KeyedResult, error)
}

// Errors an Engine returns that callers tell apart.
var (
	ErrTaskNotFound = errors.New("task not found")
	ErrUnavailable  = errors.New("workflow engine unavailable")
)

// Outcome classifies a call for exit codes and HTTP status.
type Outcome int

const (
	OutcomeOK          Outcome = iota // accepted; every waited-for host succeeded
	OutcomeHostsFailed                // waited, and some host ended non-zero
	OutcomeBadRequest                 // a field broke a rule; nothing started
	OutcomeUnavailable                // the engine could not be reached
	OutcomeNotFound                   // no such task
	OutcomeForbidden                  // the caller's app may not touch a namespace; nothing started
)

// SyncTimeout bounds how long a synchronous registry call waits for hosts,
// unless its caller asks to wait; those still running then answer 115, as
// seed 004 documents.
const SyncTimeout = 60 * time.Second

// Call answers one API call by name with its documented response. wait
// makes an asynchronous API wait and answer like get_proc_operate_result.
func Call(ctx context.Context, e Engine, api string, body []byte, wait bool) (Response, Outcome) {
	return CallAs(ctx, e, api, body, wait, nil)
}

// CallAs is Call for a caller the edge already authenticated (say from a
// header): its identity replaces the body's, and every namespace the
// request touches must be in its grant, checked before anything starts.
func CallAs(ctx context.Context, e Engine, api string, body []byte, wait bool, g *Grant) (Response, Outcome) {
	s, err := lookup(api)
	if err != nil {
		return Failure(0, err), OutcomeBadRequest
	}
	if s.query != nil {
		q, err := s.query(body)
		if err != nil {
			return Failure(0, err), OutcomeBadRequest
		}
		if err := g.check(q.uses); err != nil {
			return forbidden(err)
		}
		return q.answer(ctx, e, g)
	}
	t, err := DecodeTask(api, body)
	if err != nil {
		return Failure(0, err), OutcomeBadRequest
	}
	if err := g.admit(t); err != nil {
		return forbidden(err)
	}
	if err := StoreFiles(ctx, t, storeOf(e)); err != nil {
		return Failure(0, err), OutcomeBadRequest
	}
	resolveAgents(e, t.Items)
	id, err := e.Start(ctx, t)
	if err != nil {
		return Failure(CodeUnavailable, err), OutcomeUnavailable
	}
	if s.kind == kindSync {
		// A caller that asks to wait (starter api --wait) waits for every
		// host, however many; one that does not gets SyncTimeout, as the
		// seed documents for the HTTP API.
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if !wait {
			wctx, cancel = context.WithTimeout(ctx, SyncTimeout)
		}
		defer cancel()
		res, err := e.Results(wctx, id, true)
		if err != nil && errors.Is(err, context.DeadlineExceeded) {
			res, err = e.Results(ctx, id, false)
		}
		if err != nil {
			return Failure(CodeUnavailable, err), OutcomeUnavailable
		}
		return SyncResponse(t, res), outcomeOf(res)
	}
	if !wait {
		return Accepted(t, id), OutcomeOK
	}
	return resultsFor(ctx, e, id, true, g, false)
}

// resultQuery decodes get_proc_operate_result, or with v2 its GSE 2.0 twin.
func resultQuery(v2 bool) func([]byte) (query, error) {
	return func(body []byte) (query, error) {
		q, err := DecodeResultQuery(body)
		if err != nil {
			return query{}, err
		}
		return query{answer: func(ctx context.Context, e Engine, g *Grant) (Response, Outcome) {
			return resultsFor(ctx, e, q.TaskID, false, g, v2)
		}}, nil
	}
}

// resultsFor answers get_proc_operate_result, or with v2 its GSE 2.0 twin
// (keys in the form the table in docs/http-api.md gives); a task touching a
// namespace outside the grant is refused whole.
func resultsFor(ctx context.Context, e Engine, taskID string, wait bool, g *Grant, v2 bool) (Response, Outcome) {
	res, refused, outcome, ok := grantedResults(ctx, e, taskID, wait, g)
	if !ok {
		return refused, outcome
	}
	key := func(r proc.KeyedResult) string { return r.Key }
	if v2 {
		key = proc.KeyV2Of
	}
	return OK(ResultData(res, key)), outcomeOf(res)
}

// grantedResults reads a task's results for a caller holding g: a task
// not found, an engine that cannot answer, or a task touching a namespace
// outside the grant is the refusal and its outcome instead.
func grantedResults(ctx context.Context, e Engine, taskID string, wait bool, g *Grant) ([]proc.KeyedResult, Response, Outcome, bool) {
	res, err := e.Results(ctx, taskID, wait)
	switch {
	case errors.Is(err, ErrTaskNotFound):
		return nil, Failure(CodeTaskNotFound, err), OutcomeNotFound, false
	case err != nil:
		return nil, Failure(CodeUnavailable, err), OutcomeUnavailable, false
	}
	if err := g.checkResults("task_id", res); err != nil {
		resp, outcome := forbidden(err)
		return nil, resp, outcome, false
	}
	return res, Response{}, OutcomeOK, true
}

func outcomeOf(res []proc.KeyedResult) Outcome {
	if proc.CountFailed(res) > 0 {
		return OutcomeHostsFailed
	}
	return OutcomeOK
}

// Validate decodes a call's body without acting on it, so a bad request is
// refused before anything is contacted.
func Validate(api string, body []byte) error {
	s, err := lookup(api)
	if err != nil {
		return err
	}
	if s.query != nil {
		_, err = s.query(body)
		return err
	}
	_, err = DecodeTask(api, body)
	return err
}
