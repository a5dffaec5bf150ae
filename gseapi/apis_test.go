package gseapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-sh/drover/internal/filestore"
	"github.com/drover-sh/drover/internal/jsonshape"
	"github.com/drover-sh/drover/proc"
)

// shapesDir holds the documented answers, one file per API, as the
// end-to-end surface test reads them.
const shapesDir = "../internal/e2e/testdata/shapes"

// tableEngine runs no host: a task's items all succeed at once. It keeps a
// registry of one process, cancels what it started, and has a content
// store, so every API of the table has what it needs.
type tableEngine struct {
	store filestore.Store
	tasks map[string]*Task
	order []string
}

func (e *tableEngine) Start(_ context.Context, t *Task) (string, error) {
	id := fmt.Sprintf("GSETASK:20261122000000:%012d", len(e.order)+1)
	e.tasks[id] = t
	e.order = append(e.order, id)
	return id, nil
}

func (e *tableEngine) Results(_ context.Context, id string, _ bool) ([]proc.KeyedResult, error) {
	t, ok := e.tasks[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrTaskNotFound, id)
	}
	out := make([]proc.KeyedResult, len(t.Items))
	for i, it := range t.Items {
		out[i] = proc.KeyedResult{Key: it.Key(), AgentID: it.Target.AgentID, HostResult: proc.HostResult{Code: proc.CodeSuccess, Message: "success"}}
	}
	return out, nil
}

func (e *tableEngine) Registered(_ context.Context, ns, _ string) ([]proc.Item, error) {
	return []proc.Item{{Target: proc.Target{CloudID: 1, SupplierID: 2, IP: "10.0.0.1"}, Process: proc.ProcessID{Namespace: ns, Name: "proc-test"}}}, nil
}

func (e *tableEngine) Cancel(_ context.Context, id string) (bool, error) {
	if _, ok := e.tasks[id]; !ok {
		return false, fmt.Errorf("%w: %s", ErrTaskNotFound, id)
	}
	return false, nil
}

func (e *tableEngine) ContentStore() ContentStore { return e.store }

// apiCase is a valid request to one API and the answer its callers parse:
// a documented example (the file of that name in shapesDir, else doc
// itself) and any fields more.
type apiCase struct {
	api, body, doc string
	more           map[string]string
}

// started stands, in a query's body, for the id of a task started before.
const started = "{{task}}"

func apiCases(t *testing.T) []apiCase {
	seed := func(file string) string { return string(exampleOf(t, file)) }
	taskID := `{"result":true,"code":0,"message":"success","data":{"task_id":"GSETASK:1"}}`
	status := `{"meta":{"namespace":"gse","name":"proc-test"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":1,"bk_supplier_id":2}]}`
	target := `"meta":{"namespace":"web","name":"svc"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0}]`
	return []apiCase{
		{APIOperateProcess, seed("operate_process.json"), APIOperateProcess, nil},
		{APIOperateProc, seed("operate_proc.json"), APIOperateProc, nil},
		// GSE 2.0's meta form is read back by data.task_id (the dialect).
		{APIOperateProc, metaForm, taskID, nil},
		{APIOperateProcV2, seed("operate_proc_v2.json"), APIOperateProcV2, nil},
		{APIOperateProcV2, metaForm, taskID, nil},
		{APIOperateProcMulti, multiBase, APIOperateProcMulti, nil},
		{APIManageProc, seed("manage_proc.json"), APIManageProc, nil},
		{APIRegisterProcInfo, seed("register_proc_info.json"), APIRegisterProcInfo, nil},
		{APIUpdateProcInfo, seed("register_proc_info.json"), APIUpdateProcInfo, nil},
		{APIUnregisterProcInfo, seed("register_proc_info.json"), APIUnregisterProcInfo, nil},
		{APIGetProcOperateResult, `{"task_id":"` + started + `"}`, APIGetProcOperateResult, nil},
		{APIGetProcOperateResult, `{"bk_biz_id":1,"bk_gse_taskid":"` + started + `"}`, APIGetProcOperateResult, nil},
		{APIGetProcOperateResultV2, `{"task_id":"` + started + `"}`, APIGetProcOperateResult, nil},
		{APIGetProcStatus, status, APIGetProcStatus, nil},
		{APIGetProcStatusV2, status, APIGetProcStatus, map[string]string{
			".data.proc_infos[].bk_agent_id": "string", ".data.proc_infos[].host.bk_agent_id": "string"}},
		{APISyncProcStatus, `{"meta":{"namespace":"gse"},"page":{"start":0,"limit":100}}`, APISyncProcStatus, nil},
		// drover's own, as docs/files.md and docs/operating.md document their answers.
		{APIPushConfig, `{` + target + `,"files":[{"path":"/data/app/app.conf","content":"cG9ydCA9IDIK"}],"then":"reload"}`, taskID, nil},
		{APIRepairConfig, `{` + target + `}`, taskID, nil},
		{APITailLog, `{"meta":{"namespace":"web","name":"svc"},"agent_id_list":["0:10.0.0.1"],"tail":5,"grep":"^E"}`, taskID, nil},
		{APICancelTask, `{"task_id":"` + started + `"}`, `{"result":true,"code":0,"message":"success","data":{"task_id":"GSETASK:1","cancelled":true}}`, nil},
	}
}

// documented is the shape of c's documented answer.
func (c apiCase) documented(t *testing.T) map[string]string {
	t.Helper()
	var s map[string]string
	var err error
	if strings.HasPrefix(c.doc, "{") {
		s, err = jsonshape.OfJSON([]byte(c.doc))
	} else {
		s, err = jsonshape.File(filepath.Join(shapesDir, c.doc+".json"))
	}
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(s, c.more)
	return s
}

// opsAuth authenticates as the app "ops" by the API gateway's header,
// which the seeds' own bk_app_code and bk_app_secret do not override.
var opsAuth = map[string]string{"X-Bkapi-Authorization": `{"bk_app_code":"ops","bk_app_secret":"s3cret","bk_username":"alice"}`}

// httpPaths are the paths the gateway serves s at, and those where it must
// not be found.
func httpPaths(s apiSpec) (served, notFound []string) {
	gse := []string{"/api/c/compapi/v2/gse/" + s.name + "/", "/api/c/compapi/v2/gse/" + s.name,
		"/api/v2/proc/" + s.name, "/api/v2/proc/" + s.name + "/"}
	switch s.route {
	case routeGSE:
		return gse, nil
	case routeDrover:
		return []string{droverPath + s.name, droverPath + s.name + "/"}, gse
	}
	return nil, gse
}

// TestEveryAPIInTheTable walks every API of the table through decode,
// accept and answer: its valid request is accepted by Validate, answered by
// Call (what `starter api` runs) in the shape its callers parse, with the
// task id the engine gave where it answers one, and answered alike at every
// HTTP path the table routes it to, and not found at the others.
func TestEveryAPIInTheTable(t *testing.T) {
	eng := &tableEngine{store: dirStore(t), tasks: map[string]*Task{}}
	g := &Gateway{Engine: eng, Apps: []App{{Code: "ops", Secret: "s3cret"}}}
	ctx := context.Background()
	first, _ := Call(ctx, eng, APIOperateProcess, exampleOf(t, "operate_process.json"), false)
	firstID := first.Data.(TaskData).TaskID
	covered := map[string]bool{}
	for _, c := range apiCases(t) {
		s, err := lookup(c.api)
		if err != nil {
			t.Fatalf("%s: %v", c.api, err)
		}
		covered[c.api] = true
		body := []byte(strings.ReplaceAll(c.body, started, firstID))
		if err := Validate(c.api, body); err != nil {
			t.Errorf("%s: valid request refused: %v", c.api, err)
			continue
		}
		before := len(eng.order)
		resp, outcome := Call(ctx, eng, c.api, body, false)
		got := shapeOfAnswer(t, resp)
		if outcome != OutcomeOK || !resp.Result {
			t.Errorf("%s: %v %+v", c.api, outcome, resp)
			continue
		}
		if missing := jsonshape.Missing(c.documented(t), got); len(missing) > 0 {
			t.Errorf("%s: the answer lacks what its callers read, %v:\n%+v", c.api, missing, resp)
		}
		checkTaskID(t, s, eng, before, resp)
		served, notFound := httpPaths(s)
		for _, path := range served {
			status, hresp := serve(t, g, path, string(body), opsAuth)
			if status != http.StatusOK || !maps.Equal(shapeOfAnswer(t, hresp), got) {
				t.Errorf("%s at %s: HTTP %d %+v, want the shape of %+v", c.api, path, status, hresp, resp)
			}
		}
		for _, path := range notFound {
			if status, _ := serve(t, g, path, string(body), opsAuth); status != http.StatusNotFound {
				t.Errorf("%s at %s: HTTP %d, want 404: the table does not route it there", c.api, path, status)
			}
		}
	}
	for _, s := range apiTable {
		if !covered[s.name] {
			t.Errorf("%s is in the table but has no case here: add a valid request and its documented answer", s.name)
		}
	}
}

// checkTaskID checks that a task API answered the id of the task it
// started (sync APIs answer their hosts' results instead), by Accepted's
// shape, and that a query started no task of its caller's.
func checkTaskID(t *testing.T, s apiSpec, eng *tableEngine, before int, resp Response) {
	t.Helper()
	if s.kind == kindQuery {
		for _, id := range eng.order[before:] {
			if task := eng.tasks[id]; task.API != APIGetProcStatus || task.Op != proc.OpStatus {
				t.Errorf("%s started %v", s.name, task)
			}
		}
		return
	}
	if len(eng.order) != before+1 {
		t.Fatalf("%s started %d tasks, want 1", s.name, len(eng.order)-before)
	}
	id := eng.order[before]
	task := eng.tasks[id]
	if task.API != s.name || (task.Files != nil) != (s.kind == kindFile) {
		t.Errorf("%s started %v", s.name, task)
	}
	accepted, _ := json.Marshal(Accepted(task, id))
	if s.kind == kindSync {
		if !strings.Contains(string(accepted), `"task_id":"`+id+`"`) {
			t.Errorf("%s accepted without waiting: %s", s.name, accepted)
		}
		return
	}
	answered, _ := json.Marshal(resp)
	if string(answered) != string(accepted) || !strings.Contains(string(answered), `"`+id+`"`) {
		t.Errorf("%s answered %s, want %s", s.name, answered, accepted)
	}
}

func shapeOfAnswer(t *testing.T, r Response) map[string]string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jsonshape.OfJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// An API added to the table is decoded, started, answered and routed over
// HTTP with nothing else changed; one not in it is refused, by name, with
// the names there are.
func TestAnAPIAddedToTheTableIsServed(t *testing.T) {
	const name = "operate_process_again"
	saved := apiTable
	apiTable = append(slices.Clip(apiTable), taskAPI(name, decodeOperateProcess, taskIDData))
	t.Cleanup(func() { apiTable = saved })

	eng := &tableEngine{tasks: map[string]*Task{}}
	g := &Gateway{Engine: eng, Apps: []App{{Code: "ops", Secret: "s3cret"}}}
	body := exampleOf(t, "operate_process.json")
	if err := Validate(name, body); err != nil {
		t.Fatal(err)
	}
	if resp, outcome := Call(context.Background(), eng, name, body, false); outcome != OutcomeOK || resp.Data != (TaskData{TaskID: eng.order[0]}) {
		t.Fatalf("call: %v %+v", outcome, resp)
	}
	for _, path := range []string{"/api/c/compapi/v2/gse/" + name + "/", "/api/v2/proc/" + name} {
		if status, resp := serve(t, g, path, string(body), opsAuth); status != http.StatusOK || !resp.Result {
			t.Errorf("%s: %d %+v", path, status, resp)
		}
	}
	if len(eng.order) != 3 || eng.tasks[eng.order[2]].API != name {
		t.Fatalf("started %v", eng.order)
	}

	apiTable = saved
	err := Validate(name, body)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "api" || !strings.Contains(fe.Rule, `"`+name+`"`) {
		t.Fatalf("unknown API: %v", err)
	}
	for _, s := range apiTable {
		if !strings.Contains(fe.Rule, s.name) {
			t.Errorf("the refusal does not name %s: %v", s.name, err)
		}
	}
	if resp, outcome := Call(context.Background(), eng, name, body, false); outcome != OutcomeBadRequest || resp.Message != err.Error() {
		t.Errorf("unknown API called: %v %+v", outcome, resp)
	}
	if status, _ := serve(t, g, "/api/v2/proc/"+name, string(body), opsAuth); status != http.StatusNotFound {
		t.Errorf("unknown API over HTTP: %d", status)
	}
	if len(eng.order) != 3 {
		t.Errorf("an unknown API started a task: %v", eng.order)
	}
}
