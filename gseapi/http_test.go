package gseapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-sh/drover/proc"
)

// recordingEngine records what reaches it.
type recordingEngine struct {
	started []*Task
}

func (e *recordingEngine) Start(_ context.Context, t *Task) (string, error) {
	e.started = append(e.started, t)
	return "GSETASK:20261122000000:000000000001", nil
}

func (e *recordingEngine) Results(context.Context, string, bool) ([]proc.KeyedResult, error) {
	return nil, nil
}

const opBody = `"meta":{"namespace":"gse","name":"p"},"op_type":2,"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0,"bk_supplier_id":0}]}`

func serve(t *testing.T, g *Gateway, path, body string, header map[string]string) (int, Response) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, req)
	var resp Response
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatalf("%s: not the documented JSON: %v %s", path, err, rec.Body.String())
	}
	return rec.Code, resp
}

func TestGatewayAuthentication(t *testing.T) {
	eng := &recordingEngine{}
	g := &Gateway{Engine: eng, Apps: []App{{Code: "ops", Secret: "s3cret"}}}
	cases := []struct {
		name, body string
		header     map[string]string
		status     int
	}{
		{"wrong secret", `{"bk_app_code":"ops","bk_app_secret":"nope",` + opBody, nil, http.StatusUnauthorized},
		{"unknown app", `{"bk_app_code":"who","bk_app_secret":"s3cret",` + opBody, nil, http.StatusUnauthorized},
		{"no credentials", `{` + opBody, nil, http.StatusUnauthorized},
		{"empty secret", `{"bk_app_code":"ops","bk_app_secret":"",` + opBody, nil, http.StatusUnauthorized},
	}
	for _, c := range cases {
		status, resp := serve(t, g, "/api/c/compapi/v2/gse/operate_process/", c.body, c.header)
		if status != c.status || resp.Result || resp.Code != CodeUnauthorized {
			t.Errorf("%s: %d %+v", c.name, status, resp)
		}
	}
	if len(eng.started) != 0 {
		t.Fatalf("a refused call started %d tasks", len(eng.started))
	}
	status, resp := serve(t, g, "/api/c/compapi/v2/gse/operate_process/", `{"bk_app_code":"ops","bk_app_secret":"s3cret","bk_username":"alice",`+opBody, nil)
	if status != http.StatusOK || !resp.Result || len(eng.started) != 1 || eng.started[0].Caller.Username != "alice" {
		t.Fatalf("good call: %d %+v", status, resp)
	}
	// The API gateway's header carries the credentials instead of the body.
	status, _ = serve(t, g, "/api/v2/proc/operate_process", `{`+opBody,
		map[string]string{"X-Bkapi-Authorization": `{"bk_app_code":"ops","bk_app_secret":"s3cret","bk_username":"bob"}`})
	if status != http.StatusOK || len(eng.started) != 2 || eng.started[1].Caller.Username != "bob" {
		t.Fatalf("header auth: %d", status)
	}
}

func TestGatewayRefusals(t *testing.T) {
	eng := &recordingEngine{}
	g := &Gateway{Engine: eng, Apps: []App{{Code: "ops", Secret: "s3cret"}}}
	auth := `{"bk_app_code":"ops","bk_app_secret":"s3cret",`
	status, resp := serve(t, g, "/api/v2/proc/no_such_api", auth+opBody, nil)
	if status != http.StatusNotFound || resp.Result {
		t.Fatalf("unknown api: %d %+v", status, resp)
	}
	status, resp = serve(t, g, "/api/v2/proc/operate_process", auth+`"meta":{"namespace":"gse"},"op_type":2,"hosts":[]}`, nil)
	if status != http.StatusBadRequest || resp.Code != CodeBadRequest || !strings.Contains(resp.Message, "meta.name") {
		t.Fatalf("bad body: %d %+v", status, resp)
	}
	big := auth + `"pad":"` + strings.Repeat("x", MaxBodyBytes) + `",` + opBody
	status, resp = serve(t, g, "/api/v2/proc/operate_process", big, nil)
	if status != http.StatusRequestEntityTooLarge || resp.Result {
		t.Fatalf("oversized body: %d %+v", status, resp)
	}
	if len(eng.started) != 0 {
		t.Fatalf("refused calls started %d tasks", len(eng.started))
	}
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("healthz: %d", rec.Code)
	}
}
