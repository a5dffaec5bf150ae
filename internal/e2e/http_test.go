package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/workflows"
)

func TestHTTPGateway(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	if _, err := h.StartSample("gse", "proc-test", ""); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	g := &gseapi.Gateway{Engine: &engine.Engine{Client: e.client, TaskQueue: e.cfg.TaskQueue},
		Apps: []gseapi.App{{Code: "ops", Secret: "s3cret-value"}}, Timeout: time.Minute}
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	post := func(path, body string) (int, map[string]any) {
		t.Helper()
		var out map[string]any
		return postJSON(t, srv.URL+path, body, nil, &out), out
	}
	hosts := fmt.Sprintf(`"hosts":[{"ip":%q,"bk_cloud_id":0,"bk_supplier_id":0}]`, h.IP)
	meta := `"meta":{"namespace":"gse","name":"proc-test"}`

	// A wrong secret is refused before anything starts.
	status, out := post("/api/c/compapi/v2/gse/operate_process/", `{"bk_app_code":"ops","bk_app_secret":"wrong",`+meta+`,"op_type":2,`+hosts+`}`)
	if status != http.StatusUnauthorized || out["result"] != false {
		t.Fatalf("wrong secret: %d %v", status, out)
	}
	if n := e.countOperate(t); n != 0 {
		t.Fatalf("a refused call started %d workflows", n)
	}

	auth := `"bk_app_code":"ops","bk_app_secret":"s3cret-value","bk_username":"alice"`
	spec := `"spec":{"identity":{"proc_name":"proc-test","setup_path":"/data/gse","pid_path":"/data/gse/proc-test.pid","user":"root"},` +
		`"control":{},"resource":{"cpu":10,"mem":10},"monitor_policy":{"auto_type":1}}`
	status, out = post("/api/v2/proc/register_proc_info", `{`+auth+`,`+meta+`,`+hosts+`,`+spec+`}`)
	k := key(h.IP, "gse", "proc-test")
	if status != http.StatusOK || out["data"].(map[string]any)[k].(map[string]any)["error_code"] != float64(0) {
		t.Fatalf("register_proc_info: %d %v", status, out)
	}
	status, out = post("/api/c/compapi/v2/gse/operate_process/", `{`+auth+`,`+meta+`,"op_type":2,`+hosts+`}`)
	task, _ := out["data"].(map[string]any)["task_id"].(string)
	if status != http.StatusOK || !strings.HasPrefix(task, "GSETASK:") {
		t.Fatalf("operate_process: %d %v", status, out)
	}
	waitFor(t, time.Minute, "result over HTTP", func() bool {
		_, out = post("/api/v2/proc/get_proc_operate_result", `{`+auth+`,"task_id":"`+task+`"}`)
		r, _ := out["data"].(map[string]any)[k].(map[string]any)
		return r != nil && r["error_code"] == float64(0)
	})

	// The operator is on the workflow's memo; the secret is nowhere in it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	desc, err := e.client.DescribeWorkflowExecution(ctx, task, "")
	if err != nil {
		t.Fatal(err)
	}
	memo := fmt.Sprint(desc.WorkflowExecutionInfo.Memo)
	if !strings.Contains(memo, "alice") || strings.Contains(memo, "s3cret-value") {
		t.Fatalf("memo %s", memo)
	}
	// The task is found by its search attributes, as the recipes in docs/operating.md do.
	q := fmt.Sprintf("DroverOp = 'status' AND DroverOutcome = 'ok' AND DroverHosts = '0:%s' AND DroverProcess = 'gse/proc-test' AND DroverHostCount = 1", h.IP)
	waitFor(t, 20*time.Second, "search attributes", func() bool {
		resp, err := e.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q})
		if err != nil {
			t.Fatalf("list %q: %v", q, err)
		}
		return len(resp.Executions) == 1 && resp.Executions[0].Execution.WorkflowId == task
	})
	status, out = post("/api/v2/proc/get_proc_status", `{`+auth+`,`+meta+`,`+hosts+`}`)
	infos, _ := out["data"].(map[string]any)["proc_infos"].([]any)
	if status != http.StatusOK || len(infos) != 1 || infos[0].(map[string]any)["status"] != float64(1) {
		t.Fatalf("get_proc_status: %d %v", status, out)
	}
}

// countOperate counts the Operate workflows started on the test's queue.
func (e *env) countOperate(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := e.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = '%s' AND %s", workflows.OperateWorkflowName, onQueues(e.cfg.TaskQueue))})
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Executions)
}
