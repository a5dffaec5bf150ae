package gseapi

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/drover-sh/drover/proc"
)

// cancelEngine knows one task, in namespace gse, and records cancels.
type cancelEngine struct {
	recordingEngine
	finished  bool
	cancelled []string
}

const knownTask = "GSETASK:20261123000000:000000000007"

func (e *cancelEngine) Results(_ context.Context, id string, _ bool) ([]proc.KeyedResult, error) {
	if id != knownTask {
		return nil, fmt.Errorf("%w: %s", ErrTaskNotFound, id)
	}
	return []proc.KeyedResult{{Key: "0:0:10.0.0.1:gse:p", HostResult: proc.Pending()}}, nil
}

// Cancel refuses an unknown task, as the workflow engine does: a caller
// whose grant spans every namespace reaches it without reading results.
func (e *cancelEngine) Cancel(_ context.Context, id string) (bool, error) {
	if id != knownTask {
		return false, fmt.Errorf("%w: %s", ErrTaskNotFound, id)
	}
	e.cancelled = append(e.cancelled, id)
	return e.finished, nil
}

// TestCancelTaskEndpoint: POST /api/v2/proc/drover/cancel_task cancels a
// task for an authenticated app allowed its namespaces, and refuses, naming
// why, an unknown task, a bad task id, refused credentials and a namespace
// outside the app's list, cancelling nothing then.
func TestCancelTaskEndpoint(t *testing.T) {
	eng := &cancelEngine{}
	g := &Gateway{Engine: eng, Apps: []App{{Code: "ops", Secret: "s3cret"}, {Code: "other", Secret: "x", Namespaces: []string{"web"}}}}
	body := func(app, secret, id string) string {
		return fmt.Sprintf(`{"bk_app_code":%q,"bk_app_secret":%q,"task_id":%q}`, app, secret, id)
	}
	cases := []struct {
		name, path, body string
		status, code     int
	}{
		{"cancel", CancelTaskPath, body("ops", "s3cret", knownTask), http.StatusOK, CodeOK},
		{"trailing slash", CancelTaskPath + "/", body("ops", "s3cret", knownTask), http.StatusOK, CodeOK},
		{"unknown task", CancelTaskPath, body("ops", "s3cret", "GSETASK:20261123000000:000000000008"), http.StatusNotFound, CodeTaskNotFound},
		{"bad task id", CancelTaskPath, body("ops", "s3cret", "T1"), http.StatusBadRequest, CodeBadRequest},
		{"refused secret", CancelTaskPath, body("ops", "wrong", knownTask), http.StatusUnauthorized, CodeUnauthorized},
		{"namespace not allowed", CancelTaskPath, body("other", "x", knownTask), http.StatusForbidden, CodeForbidden},
	}
	for _, c := range cases {
		before := len(eng.cancelled)
		status, resp := serve(t, g, c.path, c.body, nil)
		if status != c.status || resp.Code != c.code {
			t.Errorf("%s: HTTP %d code %d (%s), want %d %d", c.name, status, resp.Code, resp.Message, c.status, c.code)
		}
		if cancelled := len(eng.cancelled) > before; cancelled != (c.code == CodeOK) {
			t.Errorf("%s: cancelled %v", c.name, cancelled)
		}
	}
	eng.finished = true
	status, resp := serve(t, g, CancelTaskPath, body("ops", "s3cret", knownTask), nil)
	data, _ := resp.Data.(map[string]any)
	if status != http.StatusOK || resp.Code != CodeOK || data["cancelled"] != false {
		t.Fatalf("cancel of a finished task: HTTP %d %+v, want 0 with cancelled false", status, resp)
	}
}

// deadlineEngine records whether the wait for a task's results had a
// deadline.
type deadlineEngine struct {
	tableEngine
	bounded []bool
}

func (e *deadlineEngine) Results(ctx context.Context, id string, wait bool) ([]proc.KeyedResult, error) {
	_, has := ctx.Deadline()
	e.bounded = append(e.bounded, has)
	return e.tableEngine.Results(ctx, id, wait)
}

// TestSyncAPIWaitsForEveryHostWhenAsked: a registry call waits SyncTimeout
// for its hosts, as the seed documents, unless its caller asks to wait
// (starter api --wait): a register of 10,000 hosts then answers every key.
func TestSyncAPIWaitsForEveryHostWhenAsked(t *testing.T) {
	body := `{"bk_app_code":"a","bk_username":"u","meta":{"namespace":"ns","name":"p"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0}],` +
		`"spec":{"identity":{"proc_name":"p","setup_path":"/data/p","pid_path":"/data/p/p.pid"},"control":{"start_cmd":"./start.sh"}}}`
	for _, wait := range []bool{false, true} {
		e := &deadlineEngine{tableEngine: tableEngine{tasks: map[string]*Task{}}}
		resp, _ := Call(context.Background(), e, APIRegisterProcInfo, []byte(body), wait)
		if !resp.Result || len(e.bounded) == 0 {
			t.Fatalf("wait %v: %+v, results read %d times", wait, resp, len(e.bounded))
		}
		if e.bounded[0] == wait {
			t.Errorf("wait %v: the wait for the hosts had a deadline: %v, want %v", wait, e.bounded[0], !wait)
		}
	}
}
