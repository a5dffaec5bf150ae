package gseapi

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-sh/drover/proc"
)

// scopedEngine answers results and the registry as if "web" held a task.
type scopedEngine struct {
	recordingEngine
	results []proc.KeyedResult
}

func (e *scopedEngine) Results(context.Context, string, bool) ([]proc.KeyedResult, error) {
	return e.results, nil
}

func (e *scopedEngine) Registered(context.Context, string, string) ([]proc.Item, error) {
	return nil, nil
}

const hostsJSON = `"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0,"bk_supplier_id":0}]`

// procInfoJSON is a process_infos entry for operate_proc and manage_proc.
const procInfoJSON = `"process_infos":[{"setup_path":"/opt/x","proc_name":"x","pid_path":"/opt/x/x.pid","ip_list":[{"bk_cloud_id":0,"ip":"10.0.0.1"}]}]`

const specJSON = `"spec":{"identity":{"proc_name":"x","setup_path":"/opt/x","pid_path":"/opt/x/x.pid","user":"root"},"control":{},"resource":{"cpu":1,"mem":1},"monitor_policy":{"auto_type":1}}`

// scopedBodies builds, for every API that names a namespace, a body naming
// ns, and the field a refusal must name.
func scopedBodies(ns string) map[string]struct{ body, field string } {
	meta := `"meta":{"namespace":"` + ns + `","name":"x"}`
	return map[string]struct{ body, field string }{
		APIOperateProcess:     {`{` + meta + `,"op_type":2,` + hostsJSON + `}`, "meta.namespace"},
		APIOperateProc:        {`{"bk_biz_id":"` + ns + `","op_type":2,` + procInfoJSON + `}`, "bk_biz_id"},
		APIOperateProcV2:      {`{"bk_biz_id":"` + ns + `","op_type":2,` + procInfoJSON + `}`, "bk_biz_id"},
		APIOperateProcMulti:   {`{"proc_operate_req":[{"meta":{"namespace":"7","name":"x"},"op_type":2,` + hostsJSON + `},{` + meta + `,"op_type":2,` + hostsJSON + `}]}`, "proc_operate_req[1].meta.namespace"},
		APIManageProc:         {`{"bk_scope_type":"biz","bk_scope_id":"` + ns + `","op_type":2,` + strings.Replace(procInfoJSON, `"proc_name"`, `"proc_owner":"root","proc_name"`, 1) + `}`, "bk_scope_id"},
		APIRegisterProcInfo:   {`{` + meta + `,` + hostsJSON + `,` + specJSON + `}`, "meta.namespace"},
		APIUpdateProcInfo:     {`{` + meta + `,` + hostsJSON + `,` + specJSON + `}`, "meta.namespace"},
		APIUnregisterProcInfo: {`{` + meta + `,` + hostsJSON + `}`, "meta.namespace"},
		APIGetProcStatus:      {`{` + meta + `,` + hostsJSON + `}`, "meta.namespace"},
		APISyncProcStatus:     {`{"meta":{"namespace":"` + ns + `"}}`, "meta.namespace"},
	}
}

func TestNamespaceAllowList(t *testing.T) {
	eng := &scopedEngine{}
	g := &Gateway{Engine: eng, Apps: []App{
		{Code: "scoped", Secret: "s1", Namespaces: []string{"7", "8"}},
		{Code: "all", Secret: "s2"},
	}}
	as := func(app, secret, body string) string {
		return `{"bk_app_code":"` + app + `","bk_app_secret":"` + secret + `",` + body[1:]
	}
	for _, path := range []string{"/api/c/compapi/v2/gse/%s/", "/api/v2/proc/%s"} {
		for api, c := range scopedBodies("9") {
			if err := Validate(api, []byte(c.body)); err != nil {
				t.Fatalf("%s: test body is not valid: %v", api, err)
			}
			p := strings.Replace(path, "%s", api, 1)
			before := len(eng.started)
			status, resp := serve(t, g, p, as("scoped", "s1", c.body), nil)
			if status != http.StatusForbidden || resp.Result || resp.Code != CodeForbidden ||
				!strings.Contains(resp.Message, "field "+c.field+":") || !strings.Contains(resp.Message, `namespace "9"`) ||
				!strings.Contains(resp.Message, `app "scoped"`) {
				t.Errorf("%s disallowed: %d %+v", p, status, resp)
			}
			if len(eng.started) != before {
				t.Errorf("%s: a refused call started a task", p)
			}
			// An app without a list may touch any namespace.
			if status, resp := serve(t, g, p, as("all", "s2", c.body), nil); status != http.StatusOK || !resp.Result {
				t.Errorf("%s unrestricted app: %d %+v", p, status, resp)
			}
		}
		for api, c := range scopedBodies("8") {
			p := strings.Replace(path, "%s", api, 1)
			if status, resp := serve(t, g, p, as("scoped", "s1", c.body), nil); status != http.StatusOK || !resp.Result {
				t.Errorf("%s allowed: %d %+v", p, status, resp)
			}
		}
	}

	// A task's results are read only by apps that may touch all its namespaces.
	eng.results = []proc.KeyedResult{{Key: "0:0:10.0.0.1:8:x"}, {Key: "0:0:10.0.0.1:9:x"}}
	body := `{"task_id":"GSETASK:20261122000000:000000000001"}`
	status, resp := serve(t, g, "/api/v2/proc/get_proc_operate_result", as("scoped", "s1", body), nil)
	if status != http.StatusForbidden || resp.Code != CodeForbidden || !strings.Contains(resp.Message, `field task_id: namespace "9"`) {
		t.Errorf("results of a task in another namespace: %d %+v", status, resp)
	}
	eng.results = []proc.KeyedResult{{Key: "0:0:10.0.0.1:8:x"}}
	if status, resp := serve(t, g, "/api/v2/proc/get_proc_operate_result", as("scoped", "s1", body), nil); status != http.StatusOK || !resp.Result {
		t.Errorf("results of an allowed task: %d %+v", status, resp)
	}
}

// The CLI runs as the operator: no grant, every namespace.
func TestCallWithoutGrantAllowsAll(t *testing.T) {
	eng := &recordingEngine{}
	c := scopedBodies("9")[APIOperateProcess]
	if resp, outcome := Call(context.Background(), eng, APIOperateProcess, []byte(c.body), false); outcome != OutcomeOK || !resp.Result {
		t.Fatalf("%v %+v", outcome, resp)
	}
}
