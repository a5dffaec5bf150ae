package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/policies"
)

// malformed is one bad request and the field its error must name.
type malformed struct {
	name  string
	api   string
	body  string
	field string
}

// seedDoc is a seed's request example as a JSON tree, for editing.
func seedDoc(t *testing.T, name string) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(seedRequest(t, name)), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// edited returns the seed's body with each path ("a.b.0.c") set to its
// value; a value of deleteField removes the key.
func edited(t *testing.T, seed string, edits ...any) string {
	t.Helper()
	doc := seedDoc(t, seed)
	for i := 0; i+1 < len(edits); i += 2 {
		setPath(t, doc, edits[i].(string), edits[i+1])
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type deleteMarker struct{}

var deleteField = deleteMarker{}

func setPath(t *testing.T, node any, path string, v any) {
	t.Helper()
	parts := strings.Split(path, ".")
	for i, p := range parts {
		last := i == len(parts)-1
		switch n := node.(type) {
		case map[string]any:
			if last {
				if _, del := v.(deleteMarker); del {
					delete(n, p)
				} else {
					n[p] = v
				}
				return
			}
			node = n[p]
		case []any:
			k, err := strconv.Atoi(p)
			if err != nil || k >= len(n) {
				t.Fatalf("path %s: no element %s", path, p)
			}
			if last {
				n[k] = v
				return
			}
			node = n[k]
		default:
			t.Fatalf("path %s: %s is not inside an object or array", path, p)
		}
	}
}

// malformedRequests is the table: each request breaks one documented rule.
func malformedRequests(t *testing.T) []malformed {
	const (
		op   = "operate_process"
		reg  = "register_proc_info"
		v1   = "operate_proc"
		v2   = "operate_proc_v2"
		mg   = "manage_proc"
		mul  = "operate_proc_multi"
		res  = "get_proc_operate_result"
		st   = "get_proc_status"
		sync = "sync_proc_status"
	)
	host := map[string]any{"ip": "10.0.0.1", "bk_cloud_id": 0, "bk_supplier_id": 0}
	multiEntry := func(edits ...any) string {
		var proc map[string]any
		_ = json.Unmarshal([]byte(edited(t, op, edits...)), &proc)
		b, _ := json.Marshal(map[string]any{"proc_operate_req": []any{proc}})
		return string(b)
	}
	nested := strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)
	huge := `{"meta":{"namespace":"gse","name":"p"},"op_type":2,"pad":"` + strings.Repeat("x", 10<<20) + `","hosts":[]}`
	cases := []malformed{
		// Bodies that are not a request at all.
		{"empty body", op, "", "(body)"},
		{"whitespace body", op, "  \n ", "(body)"},
		{"not JSON", op, "op_type=2", "(body)"},
		{"truncated JSON", op, `{"meta":{"namespace":"gse"`, "(body)"},
		{"JSON array", op, `[1,2]`, "(body)"},
		{"JSON string", reg, `"hello"`, "(body)"},
		{"trailing data", op, edited(t, op) + `{}`, "(body)"},
		{"invalid UTF-8", op, "{\"meta\":{\"namespace\":\"g\xffse\",\"name\":\"p\"}}", "(body)"},
		{"invalid UTF-8 in a name", reg, strings.Replace(edited(t, reg), "proc-test", "proc-\xc3\x28", 1), "(body)"},
		{"deeply nested JSON", op, nested, "(body)"},
		{"10 MB body", op, huge, "(body)"},
		// Wrong types.
		{"op_type a string", op, edited(t, op, "op_type", "start"), "op_type"},
		{"op_type a float", op, edited(t, op, "op_type", 1.5), "op_type"},
		{"meta an array", op, edited(t, op, "meta", []any{1}), "meta"},
		{"namespace a number", op, edited(t, op, "meta.namespace", 7), "meta.namespace"},
		{"hosts an object", op, edited(t, op, "hosts", host), "hosts"},
		{"ip a number", op, edited(t, op, "hosts.0.ip", 10), "hosts[0].ip"},
		{"bk_cloud_id a string", op, edited(t, op, "hosts.0.bk_cloud_id", "1"), "hosts[0].bk_cloud_id"},
		{"cpu a string", reg, edited(t, reg, "spec.resource.cpu", "10%"), "spec.resource.cpu"},
		{"auto_type a bool", reg, edited(t, reg, "spec.monitor_policy.auto_type", true), "spec.monitor_policy.auto_type"},
		{"process_infos an object", v1, edited(t, v1, "process_infos", map[string]any{}), "process_infos"},
		{"ip_list a string", v2, edited(t, v2, "process_infos.0.ip_list", "10.0.0.1"), "process_infos[0].ip_list"},
		{"task_id a number", res, `{"task_id":12}`, "task_id"},
		{"page.limit a string", sync, `{"meta":{"namespace":"gse"},"page":{"start":0,"limit":"all"}}`, "page.limit"},
		// Missing required fields.
		{"no op_type", op, edited(t, op, "op_type", deleteField), "op_type"},
		{"no meta.name", op, edited(t, op, "meta.name", deleteField), "meta.name"},
		{"no meta.namespace", reg, edited(t, reg, "meta.namespace", deleteField), "meta.namespace"},
		{"no hosts", op, edited(t, op, "hosts", deleteField), "hosts"},
		{"no ip", op, edited(t, op, "hosts.0.ip", deleteField), "hosts[0].ip"},
		{"no spec", reg, edited(t, reg, "spec", deleteField), "spec"},
		{"no proc_name", reg, edited(t, reg, "spec.identity.proc_name", deleteField), "spec.identity.proc_name"},
		{"no pid_path", reg, edited(t, reg, "spec.identity.pid_path", deleteField), "spec.identity.pid_path"},
		{"no process_infos", v1, edited(t, v1, "process_infos", deleteField), "process_infos"},
		{"no setup_path", v1, edited(t, v1, "process_infos.0.setup_path", deleteField), "process_infos[0].setup_path"},
		{"no task_id", res, `{}`, "task_id"},
		{"status without hosts", st, `{"meta":{"namespace":"gse","name":"p"}}`, "hosts"},
		{"sync without namespace", sync, `{"meta":{},"page":{"start":0,"limit":10}}`, "meta.namespace"},
		{"multi without entries", mul, `{"proc_operate_req":[]}`, "proc_operate_req"},
		// Unknown kinds. An unknown op_type itself is accepted and each
		// host answers 832 naming op_type, as GSE does (TestControlOpFailures).
		{"op_type missing in manage_proc", mg, edited(t, mg, "op_type", deleteField), "op_type"},
		{"op_type null", op, edited(t, op, "op_type", nil), "op_type"},
		{"auto_type 9", reg, edited(t, reg, "spec.monitor_policy.auto_type", 9), "spec.monitor_policy.auto_type"},
		{"shell ext exe", v1, edited(t, v1, "process_infos.0.cmd_shell_ext", "exe"), "process_infos[0].cmd_shell_ext"},
		// Out-of-range numbers.
		{"cpu -1", reg, edited(t, reg, "spec.resource.cpu", -1), "spec.resource.cpu"},
		{"cpu 101", reg, edited(t, reg, "spec.resource.cpu", 101), "spec.resource.cpu"},
		{"mem -5", reg, edited(t, reg, "spec.resource.mem", -5), "spec.resource.mem"},
		{"mem 1000", reg, edited(t, reg, "spec.resource.mem", 1000), "spec.resource.mem"},
		{"cpu_lmt -1", v1, edited(t, v1, "process_infos.0.cpu_lmt", -1), "process_infos[0].cpu_lmt"},
		{"mem_lmt 200", v2, edited(t, v2, "process_infos.0.mem_lmt", 200), "process_infos[0].mem_lmt"},
		{"negative cloud id", op, edited(t, op, "hosts.0.bk_cloud_id", -1), "hosts[0].bk_cloud_id"},
		{"page.limit 0", sync, `{"meta":{"namespace":"gse"},"page":{"start":0,"limit":0}}`, "page.limit"},
		{"page.start -1", sync, `{"meta":{"namespace":"gse"},"page":{"start":-1,"limit":10}}`, "page.start"},
		// Relative paths where absolute ones are required.
		{"relative setup_path", reg, edited(t, reg, "spec.identity.setup_path", "data/gsetest"), "spec.identity.setup_path"},
		{"relative pid_path", reg, edited(t, reg, "spec.identity.pid_path", "proc-test.pid"), "spec.identity.pid_path"},
		{"dot-relative pid_path", v1, edited(t, v1, "process_infos.0.pid_path", "./run/x.pid"), "process_infos[0].pid_path"},
		{"relative configmap path", reg, edited(t, reg, "spec.configmap", []any{map[string]any{"path": "etc/a.conf", "md5": strings.Repeat("0", 32)}}), "spec.configmap[0].path"},
		// Host lists.
		{"empty hosts", op, edited(t, op, "hosts", []any{}), "hosts"},
		{"empty ip_list", v1, edited(t, v1, "process_infos.0.ip_list", []any{}), "process_infos[0].ip_list"},
		{"duplicate hosts", op, edited(t, op, "hosts", []any{host, host}), "hosts[1]"},
		{"duplicate ip_list", mg, edited(t, mg, "process_infos.0.ip_list", []any{host, host}), "process_infos[0].ip_list[1]"},
		{"bad ip", op, edited(t, op, "hosts.0.ip", "10.0.0"), "hosts[0].ip"},
		{"empty ip", reg, edited(t, reg, "hosts.0.ip", ""), "hosts[0].ip"},
		{"status with empty hosts", st, `{"meta":{"namespace":"gse","name":"p"},"hosts":[]}`, "hosts"},
		// Names.
		{"name with a colon", op, edited(t, op, "meta.name", "a:b"), "meta.name"},
		{"value_key with a colon", v1, edited(t, v1, "process_infos.0.value_key", "/data/app:appd"), "process_infos[0].value_key"},
		{"empty namespace", op, edited(t, op, "meta.namespace", ""), "meta.namespace"},
		{"proc_name with a slash", reg, edited(t, reg, "spec.identity.proc_name", "../x"), "spec.identity.proc_name"},
		{"task_id without its prefix", res, `{"task_id":"20180315180551:1000"}`, "task_id"},
		{"task_id with a newline", res, `{"task_id":"GSETASK:1\n2"}`, "task_id"},
		{"conflicting task ids", res, `{"task_id":"GSETASK:1","bk_gse_taskid":"GSETASK:2"}`, "bk_gse_taskid"},
		{"multi entry without op_type", mul, multiEntry("op_type", deleteField), "proc_operate_req[0].op_type"},

		// The GSE 2.0 dialect.
		{"operate_proc in both forms at once", v2, edited(t, v2, "meta", map[string]any{"namespace": "gse", "name": "p"}, "hosts", []any{host}), "meta"},
		{"operate_proc in neither form", v1, `{"op_type":2,"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0}]}`, "(body)"},
		{"agent id over 64 characters", op, edited(t, op, "agent_id_list", []any{strings.Repeat("a", 65)}), "agent_id_list[0]"},
		{"empty agent_id_list", op, edited(t, op, "agent_id_list", []any{}), "agent_id_list"},
		{"empty agent_id_list in a multi entry", mul, multiEntry("agent_id_list", []any{}), "proc_operate_req[0].agent_id_list"},
		{"v2 status with empty agent_id_list", "get_proc_status_v2", `{"meta":{"namespace":"gse","name":"p"},"agent_id_list":[]}`, "agent_id_list"},
		{"v2 result without task_id", "get_proc_operate_result_v2", `{}`, "task_id"},
	}
	for _, c := range cases {
		if c.api == "" {
			t.Fatalf("%s: no api", c.name)
		}
	}
	return cases
}

// TestMalformedRequestsStartNothing sends every malformed request through
// the built starter (`starter api NAME -f FILE`) and through the HTTP
// gateway of `starter serve`: each is refused with the documented error
// naming its field, and no workflow starts on the test's task queue.
func TestMalformedRequestsStartNothing(t *testing.T) {
	cfgQueue := fmt.Sprintf("e2e-malformed-%d", queueSeq.Add(1))
	c, err := client.Dial(client.Options{HostPort: server.Address, Logger: quietLog{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	starter := buildBinary(t, "starter")
	base := []string{"--temporal-address", server.Address, "--task-queue", cfgQueue}
	gw := startGateway(t, base)
	cases := malformedRequests(t)
	if len(cases) < 50 {
		t.Fatalf("only %d malformed requests", len(cases))
	}
	dir := t.TempDir()
	for i, m := range cases {
		file := filepath.Join(dir, fmt.Sprintf("%02d.json", i))
		if err := os.WriteFile(file, []byte(m.body), 0o644); err != nil {
			t.Fatal(err)
		}
		// Over the CLI.
		stdout, stderr, code := runBinary(t, starter, append([]string{"api", m.api, "-f", file}, base...)...)
		var r gseapi.Response
		jerr := json.Unmarshal([]byte(stdout), &r)
		if code != cli.ExitBadRequest || jerr != nil || r.Result || r.Code != gseapi.CodeBadRequest ||
			!strings.Contains(r.Message, "field "+m.field) || !strings.Contains(stderr, "field "+m.field) {
			t.Errorf("CLI %s (%s): exit %d, want %d naming field %s\nstdout: %.300s\nstderr: %.300s",
				m.name, m.api, code, cli.ExitBadRequest, m.field, stdout, stderr)
		}
		// Over HTTP, authenticated by header so the body's own fields
		// cannot get in the way.
		status, hr := gw.post(t, m.api, m.body)
		wantStatus := http.StatusBadRequest
		if len(m.body) > gseapi.MaxBodyBytes {
			wantStatus = http.StatusRequestEntityTooLarge
		}
		if status != wantStatus || hr.Result || hr.Code != gseapi.CodeBadRequest || !strings.Contains(hr.Message, "field "+m.field) {
			t.Errorf("HTTP %s (%s): %d %+v, want %d code %d naming field %s", m.name, m.api, status, hr, wantStatus, gseapi.CodeBadRequest, m.field)
		}
	}
	chaosCount(t, "malformed", 2*len(cases))
	if n := workflowsOnQueue(t, c, cfgQueue); n != 0 {
		t.Fatalf("malformed requests started %d workflows", n)
	}
	// The check above sees a started workflow: a good request starts one.
	status, hr := gw.post(t, "operate_process", edited(t, "operate_process"))
	if status != http.StatusOK || !hr.Result {
		t.Fatalf("a good request: %d %+v", status, hr)
	}
	waitFor(t, 20*time.Second, "the good request's workflow listed", func() bool { return workflowsOnQueue(t, c, cfgQueue) == 1 })
	task, _ := hr.Data.(map[string]any)["task_id"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.TerminateWorkflow(ctx, task, "", "test finished"); err != nil {
		t.Fatal(err)
	}
}

// workflowsOnQueue counts every workflow, of any type, started on queue.
// onQueues is the listing query of the workflows a deployment on queue
// runs: its host workflows on queue, its tasks on queue's tasks' queue.
func onQueues(queue string) string {
	return fmt.Sprintf("(TaskQueue = '%s' OR TaskQueue = '%s')", queue, policies.TasksQueue(queue))
}

func workflowsOnQueue(t *testing.T, c client.Client, queue string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: onQueues(queue)})
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Executions)
}

// gateway is a running `starter serve`.
type gateway struct {
	url, auth string
}

// startGateway runs `starter serve` on a free port with one app whose
// secret comes from the environment, as an operator configures it.
func startGateway(t *testing.T, base []string) *gateway {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "drover.yaml")
	if err := os.WriteFile(conf, []byte("apps:\n  - code: chaos\n    secret_env: DROVER_TEST_APP_SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const secret = "chaos-app-secret"
	_, addr := startBinary(t, "starter", []string{"DROVER_TEST_APP_SECRET=" + secret}, filepath.Join(dir, "serve.log"),
		append([]string{"serve", "--listen", "127.0.0.1:0", "--config", conf, "--log-level", "error"}, base...)...)
	auth, _ := json.Marshal(map[string]string{"bk_app_code": "chaos", "bk_app_secret": secret})
	return &gateway{url: "http://" + addr, auth: string(auth)}
}

// post calls api at the ESB path and decodes the envelope.
func (g *gateway) post(t *testing.T, api, body string) (int, gseapi.Response) {
	t.Helper()
	var r gseapi.Response
	return postJSON(t, g.url+"/api/c/compapi/v2/gse/"+api+"/", body, map[string]string{"X-Bkapi-Authorization": g.auth}, &r), r
}
