package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/drover-sh/drover/internal/jsonshape"
	"github.com/drover-sh/drover/proc"
)

// TestEveryAPIOverCLIAndHTTP calls each API name through `starter api` and
// through `starter serve` on both HTTP path styles, and checks that the three
// answers have one shape, and that it holds every field the seeds and the
// reference document, with the documented JSON types.
func TestEveryAPIOverCLIAndHTTP(t *testing.T) {
	// Beside the suite's other parallel tests: it mostly waits on ops of one host.
	t.Parallel()
	e, h := newSeedEnv(t)
	ip := h.IP
	srv := e.startServe(t, "surface-secret-value")

	seed := func(name string) string {
		return seedRequest(t, name, "10.0.0.1", ip, "/usr/local/xxx", "/data/xxx")
	}
	reg := seed("register_proc_info")
	start := seed("operate_process")
	status := strings.Replace(start, `"op_type": 0`, `"op_type": 2`, 1)
	meta := `"meta":{"namespace":"gse","name":"proc-test"}`
	hosts := fmt.Sprintf(`"hosts":[{"ip":%q,"bk_cloud_id":1,"bk_supplier_id":2}]`, ip)

	// compare calls api three ways and returns the CLI's answer.
	compare := func(api, body string) map[string]any {
		t.Helper()
		cliResp, _ := e.callSeed(t, api, body)
		want := documentedShape(t, api)
		answers := map[string]map[string]any{"cli": cliResp}
		for _, path := range []string{"/api/c/compapi/v2/gse/" + api + "/", "/api/v2/proc/" + api} {
			answers[path] = srv.post(t, path, body)
		}
		cliShape := jsonshape.Of(cliResp)
		for how, resp := range answers {
			got := jsonshape.Of(resp)
			if how != "cli" && !maps.Equal(got, cliShape) {
				t.Fatalf("%s: %s answers another shape than the CLI:\nhttp: %v\ncli:  %v", api, how, got, cliShape)
			}
			if missing := jsonshape.Missing(want, got); len(missing) > 0 {
				t.Fatalf("%s over %s lacks documented fields %v:\n%v", api, how, missing, resp)
			}
		}
		return cliResp
	}

	compare("register_proc_info", reg)
	compare("update_proc_info", reg)

	// Status reads the host at once, so it waits for the start to finish.
	// The start goes out three times (CLI and both HTTP paths) and the host
	// runs them in the order they reach it: the CLI's may be the one that
	// finds the process already running (828), with the same content.
	key := "1:2:" + ip + ":gse:proc-test"
	for _, tc := range []struct {
		request, content string
		codes            []proc.Code
	}{{start, "content_control", []proc.Code{proc.CodeSuccess, proc.CodeAlreadyRunning}}, {status, "content_status", []proc.Code{proc.CodeSuccess}}} {
		task := compare("operate_process", tc.request)["data"].(map[string]any)["task_id"].(string)
		body := fmt.Sprintf(`{"task_id":%q}`, task)
		waitFor(t, time.Minute, "task "+task, func() bool {
			r, _ := srv.post(t, "/api/v2/proc/get_proc_operate_result", body)["data"].(map[string]any)[key].(map[string]any)
			return r != nil && r["error_code"] != float64(115)
		})
		resp := compare("get_proc_operate_result", body)
		entry := hostEntry(t, resp, key)
		if !slices.Contains(tc.codes, proc.Code(entry.ErrorCode)) {
			t.Fatalf("%s: %+v, want one of %v", task, entry, tc.codes)
		}
		var content any
		if err := json.Unmarshal([]byte(entry.Content), &content); err != nil {
			t.Fatalf("content of %s is not a JSON string: %v", task, err)
		}
		if missing := jsonshape.Missing(documentedShape(t, tc.content), jsonshape.Of(content)); len(missing) > 0 {
			t.Fatalf("%s content lacks documented fields %v: %s", task, missing, entry.Content)
		}
	}

	infos := compare("get_proc_status", `{`+meta+`,`+hosts+`}`)["data"].(map[string]any)["proc_infos"].([]any)
	if len(infos) != 1 || infos[0].(map[string]any)["status"] != float64(1) {
		t.Fatalf("get_proc_status: %v", infos)
	}
	synced := compare("sync_proc_status", `{"meta":{"namespace":"gse"},"page":{"start":0,"limit":100}}`)["data"].(map[string]any)
	if synced["count"] != float64(1) {
		t.Fatalf("sync_proc_status: %v", synced)
	}
	compare("operate_proc_multi", `{"proc_operate_req":[{`+meta+`,`+hosts+`,"op_type":2}]}`)
	compare("operate_proc", seed("operate_proc"))
	compare("operate_proc_v2", seed("operate_proc_v2"))
	compare("manage_proc", seed("manage_proc"))
	compare("unregister_proc_info", reg)

	// The caller's secret is credentials: refused when wrong, and it never
	// reaches the access log.
	if resp := srv.postAs(t, "/api/v2/proc/get_proc_status", `{`+meta+`,`+hosts+`}`, "wrong"); resp["result"] != false || resp["code"] != float64(1000002) {
		t.Fatalf("wrong secret: %v", resp)
	}
	if log := srv.log(); strings.Contains(log, srv.secret) || !strings.Contains(log, "get_proc_status") {
		t.Fatalf("access log must name the API and never the secret:\n%s", log)
	}
}

// serveProc is a running `starter serve`.
type serveProc struct {
	url, secret, logPath string
}

// startServe runs the built starter's HTTP gateway for the test's queue,
// with one app whose secret comes from the environment.
func (e *env) startServe(t *testing.T, secret string) *serveProc {
	t.Helper()
	dir := t.TempDir()
	cfg := map[string]any{
		"temporal_address": e.cfg.TemporalAddress, "task_queue": e.cfg.TaskQueue, "inventory": e.cfg.Inventory,
		"log_format": "json", "log_level": "info",
		"apps": []map[string]any{{"code": "ops", "secret_env": "DROVER_SURFACE_SECRET"}},
	}
	b, _ := yaml.Marshal(cfg)
	cfgPath := filepath.Join(dir, "drover.yaml")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "serve.log")
	_, addr := startBinary(t, "starter", []string{"DROVER_SURFACE_SECRET=" + secret}, logPath,
		"serve", "--config", cfgPath, "--listen", "127.0.0.1:0")
	return &serveProc{url: "http://" + addr, secret: secret, logPath: logPath}
}

func (s *serveProc) post(t *testing.T, path, body string) map[string]any {
	t.Helper()
	return s.postAs(t, path, body, s.secret)
}

// postAs sends body with the caller fields set, as a BlueKing caller does.
func (s *serveProc) postAs(t *testing.T, path, body, secret string) map[string]any {
	t.Helper()
	var req map[string]any
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	req["bk_app_code"], req["bk_app_secret"], req["bk_username"] = "ops", secret, "alice"
	b, _ := json.Marshal(req)
	var out map[string]any
	postJSON(t, s.url+path, string(b), nil, &out)
	return out
}

func (s *serveProc) log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// documentedShape is the shape of a documented response example.
func documentedShape(t *testing.T, name string) map[string]string {
	t.Helper()
	s, err := jsonshape.File(filepath.Join("testdata", "shapes", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
