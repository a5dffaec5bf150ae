package gseapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// RolloutEngine is an Engine that also runs ops as rollouts: batch by
// batch, with a failure budget, a health gate and controls.
type RolloutEngine interface {
	Engine
	// StartRollout begins t as a rollout and returns its task id.
	StartRollout(ctx context.Context, t *Task, r policies.Rollout) (string, error)
	// ControlRollout sends one of pause, resume, approve, abort.
	ControlRollout(ctx context.Context, taskID, action string) error
	// RolloutStatus returns the rollout's state and counts, JSON-ready.
	RolloutStatus(ctx context.Context, taskID string) (any, error)
}

// ErrNotRollout means the task exists but is not a rollout, or has ended
// where a control needs it running.
var ErrNotRollout = errors.New("not a running rollout")

// RolloutActions are the controls, with status, the endpoint takes.
var RolloutActions = []string{"status", "pause", "resume", "approve", "abort"}

// RolloutJSON is the rollout object of drover's rollout endpoint; times in
// seconds, like the GSE spec's.
type RolloutJSON struct {
	Canary             int           `json:"canary"`
	Batch              policies.Size `json:"batch"`
	MaxFail            policies.Size `json:"max_fail"`
	MinHealthy         int           `json:"min_healthy"`
	Pause              int           `json:"pause"`
	ApproveAfterCanary bool          `json:"approve_after_canary"`
}

// Policy is the rollout as the workflow takes it.
func (r RolloutJSON) Policy() policies.Rollout {
	return policies.Rollout{Canary: r.Canary, Batch: r.Batch, MaxFail: r.MaxFail, ApproveAfterCanary: r.ApproveAfterCanary,
		MinHealthy: time.Duration(r.MinHealthy) * time.Second, Pause: time.Duration(r.Pause) * time.Second}
}

// DecodeRollout decodes the rollout endpoint's body: an operate_proc_multi
// body (object form) plus a rollout object. Only control ops roll out.
func DecodeRollout(body []byte) (*Task, policies.Rollout, error) {
	var wrap struct {
		Rollout json.RawMessage `json:"rollout"`
	}
	if t := strings.TrimSpace(string(body)); !strings.HasPrefix(t, "{") {
		return nil, policies.Rollout{}, fieldErr("(body)", "must be an object: operate_proc_multi's body plus a rollout object")
	}
	if err := json.Unmarshal(body, &wrap); err != nil {
		return nil, policies.Rollout{}, fieldErr("(body)", "is not JSON: %v", err)
	}
	if len(wrap.Rollout) == 0 || string(wrap.Rollout) == "null" {
		return nil, policies.Rollout{}, fieldErr("rollout", "is required here (without one, call operate_proc_multi)")
	}
	var rj RolloutJSON
	dec := json.NewDecoder(strings.NewReader(string(wrap.Rollout)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rj); err != nil {
		return nil, policies.Rollout{}, fieldErr("rollout", "%v", err)
	}
	r := rj.Policy()
	if rj.MinHealthy < 0 || rj.Pause < 0 {
		return nil, policies.Rollout{}, fieldErr("rollout", "min_healthy and pause are seconds, 0 or more")
	}
	t, err := DecodeTask(APIOperateProcMulti, body)
	if err != nil {
		return nil, policies.Rollout{}, err
	}
	if err := r.ValidateFor("", len(t.Items)); err != nil {
		return nil, policies.Rollout{}, fieldErr("rollout", "%v", err)
	}
	if err := RolloutOp(t.Op); err != nil {
		return nil, policies.Rollout{}, fieldErr("proc_operate_req[0].op_type", "%v", err)
	}
	return t, r, nil
}

// RolloutOp checks that op is one a rollout runs: a control op.
func RolloutOp(op proc.OpType) error {
	switch op {
	case proc.OpStart, proc.OpStop, proc.OpRestart, proc.OpReload, proc.OpKill:
		return nil
	}
	return fmt.Errorf("%d (%s) cannot roll out; only start, stop, restart, reload and kill do", int(op), op)
}

// serveRollout answers POST /api/v2/drover/rollout and
// /api/v2/drover/rollout/{action}.
func (g *Gateway) serveRollout(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	action := r.PathValue("action")
	status, resp, app := g.answerRollout(r, action)
	writeJSON(w, status, resp)
	if g.Logger != nil {
		g.Logger.Info("api", "method", r.Method, "path", r.URL.Path, "api", "rollout", "action", action, "app", app,
			"status", status, "code", resp.Code, "ms", time.Since(began).Milliseconds())
	}
}

func (g *Gateway) answerRollout(r *http.Request, action string) (int, Response, string) {
	re, ok := g.Engine.(RolloutEngine)
	if !ok {
		return http.StatusNotFound, Failure(CodeBadRequest, fieldErr("api", "rollouts are not served here")), ""
	}
	if action != "" && !slices.Contains(RolloutActions, action) {
		return http.StatusNotFound, Failure(CodeBadRequest, fieldErr("action", "%q is not one of %s", action, strings.Join(RolloutActions, ", "))), ""
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return http.StatusRequestEntityTooLarge, Failure(CodeBadRequest, fieldErr("(body)", "is larger than %d bytes", MaxBodyBytes)), ""
		}
		return http.StatusBadRequest, Failure(CodeBadRequest, fieldErr("(body)", "could not be read: %v", err)), ""
	}
	caller := callerOf(r, body)
	app, ok := g.authenticated(caller)
	if !ok {
		return http.StatusUnauthorized, Failure(CodeUnauthorized, errors.New("bk_app_code or bk_app_secret refused")), caller.AppCode
	}
	grant := &Grant{Caller: caller, App: app.Code, Namespaces: app.Namespaces}
	ctx := r.Context()
	if g.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.Timeout)
		defer cancel()
	}
	resp, outcome := RolloutCall(ctx, re, action, body, grant)
	return httpStatus(outcome), resp, caller.AppCode
}

// RolloutCall answers one rollout call: start (action "") or a control
// on a task id. It is what the HTTP endpoint serves, for the CLI too.
func RolloutCall(ctx context.Context, re RolloutEngine, action string, body []byte, g *Grant) (Response, Outcome) {
	if action == "" {
		t, roll, err := DecodeRollout(body)
		if err != nil {
			return Failure(0, err), OutcomeBadRequest
		}
		if err := g.admit(t); err != nil {
			return forbidden(err)
		}
		resolveAgents(re, t.Items)
		id, err := re.StartRollout(ctx, t, roll)
		if err != nil {
			return Failure(CodeUnavailable, err), OutcomeUnavailable
		}
		return OK(TaskData{TaskID: id}), OutcomeOK
	}
	q, err := DecodeResultQuery(body)
	if err != nil {
		return Failure(0, err), OutcomeBadRequest
	}
	// The caller must be allowed every namespace the task touches.
	res, err := re.Results(ctx, q.TaskID, false)
	if err != nil {
		return engineFailure(err)
	}
	if err := g.checkResults("task_id", res); err != nil {
		return forbidden(err)
	}
	if action != "status" {
		if err := re.ControlRollout(ctx, q.TaskID, action); err != nil {
			return engineFailure(err)
		}
	}
	st, err := re.RolloutStatus(ctx, q.TaskID)
	if err != nil {
		return engineFailure(err)
	}
	return OK(st), OutcomeOK
}

func engineFailure(err error) (Response, Outcome) {
	switch {
	case errors.Is(err, ErrTaskNotFound):
		return Failure(CodeTaskNotFound, err), OutcomeNotFound
	case errors.Is(err, ErrNotRollout):
		return Failure(CodeBadRequest, fieldErr("task_id", "%v", err)), OutcomeBadRequest
	}
	return Failure(CodeUnavailable, err), OutcomeUnavailable
}

// httpStatus is the HTTP status of an outcome.
func httpStatus(o Outcome) int {
	switch o {
	case OutcomeBadRequest:
		return http.StatusBadRequest
	case OutcomeUnavailable:
		return http.StatusServiceUnavailable
	case OutcomeNotFound:
		return http.StatusNotFound
	case OutcomeForbidden:
		return http.StatusForbidden
	}
	return http.StatusOK
}
