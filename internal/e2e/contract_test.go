package e2e

// The caller contract: requests shaped the way the GSE 2.0 era callers (the
// node manager, the process-config manager, the config service and the node
// manager's Go successor) build them, sent over HTTP to a real `starter
// serve`, and every answer decoded into types written from the GSE 2.0
// dialect reference, never from drover's own encoders. A decode that a Go
// caller with fixed types would fail, fails here.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
)

// Codes as the reference documents them (and drover's 9104 / 9106 for a host
// the inventory does not know and a process with no registered spec).
const (
	gseSuccess        = 0
	gseRunning        = 115
	gseAlreadyRunning = 828
	gseNotRunning     = 829
	gseAlreadyExists  = 850
	gseUnknownHost    = 9104
	gseNotRegistered  = 9106
)

// ---- answers, typed as the reference writes them ----
//
// A field tagged omitempty is optional; every other field must be present and
// not null, with the documented JSON type (decodeStrict).

type gseEnvelope struct {
	Result  bool            `json:"result"`
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type gseTaskData struct {
	TaskID string `json:"task_id"`
}

// gseKeyed is one key's entry of a keyed answer: register, update,
// unregister, and both result APIs.
type gseKeyed struct {
	ErrorCode int    `json:"error_code"`
	ErrorMsg  string `json:"error_msg"`
	Content   string `json:"content"`
}

// gseControlContent is `content` of a control op.
type gseControlContent struct {
	Value []struct {
		ProcName   string `json:"procName"`
		SetupPath  string `json:"setupPath"`
		FuncID     string `json:"funcID"`
		InstanceID string `json:"instanceID"`
		Result     string `json:"result"`
		IsAuto     bool   `json:"isAuto"`
	} `json:"value"`
}

// gseStatusContent is `content` of a status op, as the GSE 2.0 agent emits it.
type gseStatusContent struct {
	IP        string `json:"ip"`
	BkAgentID string `json:"bk_agent_id"`
	UTCTime   string `json:"utctime"`
	UTCTime2  string `json:"utctime2"`
	Timezone  int    `json:"timezone"`
	Process   []struct {
		ProcName string              `json:"procname"`
		Instance []gseStatusInstance `json:"instance"`
	} `json:"process"`
}

type gseStatusInstance struct {
	Cmdline       string  `json:"cmdline"`
	ProcessName   string  `json:"processName"`
	Version       string  `json:"version"`
	Health        string  `json:"health"`
	IsAuto        bool    `json:"isAuto"`
	CPUUsage      float64 `json:"cpuUsage"`
	CPUUsageAve   float64 `json:"cpuUsageAve"`
	PhyMemUsage   float64 `json:"phyMemUsage"`
	UsePhyMem     int64   `json:"usePhyMem"`
	DiskSize      int64   `json:"diskSize"`
	Pid           int     `json:"pid"`
	StartTime     string  `json:"startTime"`
	Stat          string  `json:"stat"`
	Utime         string  `json:"utime"`
	Stime         string  `json:"stime"`
	ThreadCount   int     `json:"threadCount"`
	ElapsedTime   int64   `json:"elapsedTime"`
	RegisterTime  int64   `json:"register_time"`
	LastStartTime int64   `json:"last_start_time"`
	ReportTime    int64   `json:"report_time"`
}

// gseProcInfo is one data.proc_infos[] entry of get_proc_status and
// sync_proc_status (types from their API docs).
type gseProcInfo struct {
	Meta struct {
		Namespace string         `json:"namespace"`
		Name      string         `json:"name"`
		Labels    map[string]any `json:"labels"`
	} `json:"meta"`
	Host struct {
		IP           string `json:"ip"`
		BkCloudID    int    `json:"bk_cloud_id"`
		BkSupplierID int    `json:"bk_supplier_id"`
	} `json:"host"`
	Flag          int     `json:"flag"`
	Status        int     `json:"status"`
	IsAuto        any     `json:"isauto"`
	Message       string  `json:"message"`
	Pid           int     `json:"pid"`
	Version       string  `json:"version"`
	RegisterTime  int64   `json:"register_time"`
	LastStartTime int64   `json:"last_start_time"`
	ReportTime    int64   `json:"report_time"`
	CPUUsage      float64 `json:"cpu_usage"`
	MemUsage      float64 `json:"mem_usage"`
	FD            int64   `json:"fd"`
	Disk          int64   `json:"disk"`
	Net           int64   `json:"net"`
}

// gseProcInfoV2 is a get_proc_status_v2 entry: as get_proc_status, plus
// bk_agent_id in the entry and in its host.
type gseProcInfoV2 struct {
	BkAgentID string `json:"bk_agent_id"`
	Meta      struct {
		Namespace string         `json:"namespace"`
		Name      string         `json:"name"`
		Labels    map[string]any `json:"labels"`
	} `json:"meta"`
	Host struct {
		IP           string `json:"ip"`
		BkCloudID    int    `json:"bk_cloud_id"`
		BkAgentID    string `json:"bk_agent_id"`
		BkSupplierID int    `json:"bk_supplier_id,omitempty"`
	} `json:"host"`
	Flag          int     `json:"flag"`
	Status        int     `json:"status"`
	IsAuto        any     `json:"isauto"`
	Message       string  `json:"message"`
	Pid           int     `json:"pid"`
	Version       string  `json:"version"`
	RegisterTime  int64   `json:"register_time"`
	LastStartTime int64   `json:"last_start_time"`
	ReportTime    int64   `json:"report_time"`
	CPUUsage      float64 `json:"cpu_usage"`
	MemUsage      float64 `json:"mem_usage"`
	FD            int64   `json:"fd"`
	Disk          int64   `json:"disk"`
	Net           int64   `json:"net"`
}

type gseStatusData struct {
	ProcInfos []gseProcInfo `json:"proc_infos"`
}

type gseStatusDataV2 struct {
	ProcInfos []gseProcInfoV2 `json:"proc_infos"`
}

type gseSyncData struct {
	Count     int           `json:"count"`
	ProcInfos []gseProcInfo `json:"proc_infos"`
}

// decodeStrict decodes data into v and fails, as a Go caller with fixed
// types would, on a value of another JSON type; it also fails on a required
// key (any field not tagged omitempty) that is missing or null.
func decodeStrict(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	return requireKeys("$", reflect.TypeOf(v).Elem(), raw)
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

func requireKeys(path string, t reflect.Type, raw any) error {
	if t == rawMessageType || t.Kind() == reflect.Interface {
		return nil // any JSON value
	}
	if raw == nil {
		return fmt.Errorf("%s is null, want %s", path, t)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return requireKeys(path, t.Elem(), raw)
	case reflect.Struct:
		m, ok := raw.(map[string]any)
		if !ok {
			return fmt.Errorf("%s is %T, want an object", path, raw)
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			val, ok := m[name]
			if !ok {
				if strings.Contains(opts, "omitempty") {
					continue
				}
				return fmt.Errorf("%s.%s is missing", path, name)
			}
			if err := requireKeys(path+"."+name, f.Type, val); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := raw.(map[string]any)
		if !ok {
			return fmt.Errorf("%s is %T, want an object", path, raw)
		}
		for k, val := range m {
			if err := requireKeys(path+"."+k, t.Elem(), val); err != nil {
				return err
			}
		}
	case reflect.Slice:
		a, ok := raw.([]any)
		if !ok {
			return fmt.Errorf("%s is %T, want an array", path, raw)
		}
		for i, val := range a {
			if err := requireKeys(fmt.Sprintf("%s[%d]", path, i), t.Elem(), val); err != nil {
				return err
			}
		}
	case reflect.String:
		if _, ok := raw.(string); !ok {
			return fmt.Errorf("%s is %v, want a string", path, raw)
		}
	case reflect.Bool:
		if _, ok := raw.(bool); !ok {
			return fmt.Errorf("%s is %v, want a bool", path, raw)
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := raw.(json.Number)
		if _, err := n.Int64(); !ok || err != nil {
			return fmt.Errorf("%s is %v, want an integer", path, raw)
		}
	case reflect.Float64:
		if _, ok := raw.(json.Number); !ok {
			return fmt.Errorf("%s is %v, want a number", path, raw)
		}
	}
	return nil
}

// ---- the caller ----

// contractPaths are the four routes a caller may use for one API: the ESB
// path and the GSE 2.0 gateway path, each with and without the slash.
var contractPaths = []string{
	"/api/c/compapi/v2/gse/%s/",
	"/api/c/compapi/v2/gse/%s",
	"/api/v2/proc/%s",
	"/api/v2/proc/%s/",
}

// gseCaller calls a running `starter serve` the way the GSE 2.0 era callers
// do: credentials in the X-Bkapi-Authorization header, never in the body,
// plus a tenant header.
type gseCaller struct {
	url, secret string
	// poll is how often follow asks get_proc_operate_result_v2 again.
	poll time.Duration
}

func (c *gseCaller) headers(secret string) map[string]string {
	auth, _ := json.Marshal(map[string]string{"bk_app_code": "ops", "bk_app_secret": secret, "bk_username": "alice"})
	return map[string]string{"X-Bkapi-Authorization": string(auth), "X-Bk-Tenant-Id": "default"}
}

// raw posts body to one of the contractPaths and returns the HTTP status and
// the answer's bytes.
func (c *gseCaller) raw(t *testing.T, api string, path int, body any, secret string) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	var out json.RawMessage
	status := postJSON(t, c.url+fmt.Sprintf(contractPaths[path%len(contractPaths)], api), string(b), c.headers(secret), &out)
	return status, out
}

// call posts body and checks the envelope a caller parses: HTTP 200, result
// true, code 0; data decodes strictly into data.
func (c *gseCaller) call(t *testing.T, api string, path int, body, data any) {
	t.Helper()
	where := api + " at " + fmt.Sprintf(contractPaths[path%len(contractPaths)], api)
	status, out := c.raw(t, api, path, body, c.secret)
	var env gseEnvelope
	if err := decodeStrict(out, &env); err != nil {
		t.Fatalf("%s: HTTP %d, the envelope is not {result, code, message, data}: %v\n%s", where, status, err, out)
	}
	if status != http.StatusOK || !env.Result || env.Code != 0 {
		t.Fatalf("%s: HTTP %d, result %v, code %d, want 200, true, 0: %s", where, status, env.Result, env.Code, out)
	}
	if err := decodeStrict(env.Data, data); err != nil {
		t.Fatalf("%s: data does not decode as documented: %v\n%s", where, err, env.Data)
	}
}

// keyed calls an API that answers keyed per host and process, and checks
// that it answers exactly the keys asked for.
func (c *gseCaller) keyed(t *testing.T, api string, path int, body any, keys []string) map[string]gseKeyed {
	t.Helper()
	var data map[string]gseKeyed
	c.call(t, api, path, body, &data)
	wantKeys(t, api, data, keys)
	return data
}

// operate starts an op and returns its task id.
func (c *gseCaller) operate(t *testing.T, api string, path int, body any) string {
	t.Helper()
	var d gseTaskData
	c.call(t, api, path, body, &d)
	if d.TaskID == "" {
		t.Fatalf("%s: empty data.task_id", api)
	}
	return d.TaskID
}

// result is one poll of get_proc_operate_result (v1) or _v2.
func (c *gseCaller) result(t *testing.T, v2 bool, path int, task string, keys []string) map[string]gseKeyed {
	t.Helper()
	api := "get_proc_operate_result"
	if v2 {
		api += "_v2"
	}
	return c.keyed(t, api, path, map[string]any{"task_id": task}, keys)
}

// wait follows a task as the callers do (see follow) and returns the final
// v2 and v1 answers.
func (c *gseCaller) wait(t *testing.T, task string, path int, v1Keys, v2Keys []string) (v2, v1 map[string]gseKeyed) {
	t.Helper()
	a := c.follow(t, task, path, v1Keys, v2Keys)
	return a.v2, a.v1
}

// taskAnswers are the first and the final answers of the result APIs.
type taskAnswers struct {
	first, v2, v1 map[string]gseKeyed
}

// follow follows a task as the callers do: the first answer of both result
// APIs already holds every requested key (115 while running, top-level code
// 0), then get_proc_operate_result_v2 every c.poll until no key is 115. A key
// once final keeps its code. v1Keys[i] and v2Keys[i] name the same (host,
// process); the final v1 answer must agree with v2 key by key. With no
// v1Keys only v2 is asked.
func (c *gseCaller) follow(t *testing.T, task string, path int, v1Keys, v2Keys []string) taskAnswers {
	t.Helper()
	var a taskAnswers
	a.first = c.result(t, true, path, task, v2Keys)
	if v1Keys != nil {
		c.result(t, false, path+1, task, v1Keys)
	}
	final := map[string]int{}
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; ; i++ {
		if i > 0 {
			a.v2 = c.result(t, true, path+i, task, v2Keys)
		} else {
			a.v2 = a.first
		}
		for k, r := range a.v2 {
			if was, ok := final[k]; ok && r.ErrorCode != was {
				t.Fatalf("task %s: %s answered %d, then %+v", task, k, was, r)
			}
			if r.ErrorCode != gseRunning {
				final[k] = r.ErrorCode
			}
		}
		if !anyRunning(a.v2) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still has keys at 115 after 2 minutes: %+v", task, a.v2)
		}
		time.Sleep(c.poll)
	}
	if v1Keys == nil {
		return a
	}
	a.v1 = c.result(t, false, path, task, v1Keys)
	for i, k := range v1Keys {
		if a.v1[k].ErrorCode != a.v2[v2Keys[i]].ErrorCode {
			t.Fatalf("task %s: v1 %s answers %+v, v2 %s answers %+v", task, k, a.v1[k], v2Keys[i], a.v2[v2Keys[i]])
		}
	}
	return a
}

func anyRunning(data map[string]gseKeyed) bool {
	for _, r := range data {
		if r.ErrorCode == gseRunning {
			return true
		}
	}
	return false
}

func wantKeys(t *testing.T, api string, data map[string]gseKeyed, keys []string) {
	t.Helper()
	got := make([]string, 0, len(data))
	for k := range data {
		got = append(got, k)
	}
	want := slices.Clone(keys)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s answers keys %q, want exactly %q", api, got, want)
	}
}

func wantCodes(t *testing.T, what string, data map[string]gseKeyed, code int, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if data[k].ErrorCode != code {
			t.Fatalf("%s: %s answers %+v, want error_code %d", what, k, data[k], code)
		}
	}
}

// controlOf decodes a control op's content: exactly one value[] entry.
func controlOf(t *testing.T, key string, r gseKeyed) gseControlContent {
	t.Helper()
	var c gseControlContent
	if err := decodeStrict([]byte(r.Content), &c); err != nil {
		t.Fatalf("%s: control content does not decode as documented: %v\n%q", key, err, r.Content)
	}
	if len(c.Value) != 1 {
		t.Fatalf("%s: control content has %d value[] entries, want exactly 1: %s", key, len(c.Value), r.Content)
	}
	return c
}

// v2StatusOf decodes a status op's content: exactly one process[] entry.
func v2StatusOf(t *testing.T, key string, r gseKeyed) gseStatusContent {
	t.Helper()
	var c gseStatusContent
	if err := decodeStrict([]byte(r.Content), &c); err != nil {
		t.Fatalf("%s: status content does not decode as a GSE 2.0 caller's types: %v\n%s", key, err, r.Content)
	}
	if len(c.Process) != 1 {
		t.Fatalf("%s: status content has %d process[] entries, want exactly 1: %s", key, len(c.Process), r.Content)
	}
	// Callers read process[0].instance[0] (its pid < 0 when not running).
	if len(c.Process[0].Instance) == 0 {
		t.Fatalf("%s: status content has no instance[]: %s", key, r.Content)
	}
	return c
}

// runningPid is the pid a status content reports, failing unless one
// instance runs.
func runningPid(t *testing.T, key string, c gseStatusContent) int {
	t.Helper()
	for _, in := range c.Process[0].Instance {
		if in.Pid > 0 {
			// A caller that finds no cmdline counts the process as absent
			// and starts it again.
			if in.Cmdline == "" {
				t.Fatalf("%s: running instance with an empty cmdline: %+v", key, in)
			}
			return in.Pid
		}
	}
	t.Fatalf("%s: status content reports no running instance: %+v", key, c.Process[0])
	return 0
}

// ---- requests, shaped as the callers build them ----

// dialectProc is a process the suite manages: the test app installed under
// /data/<dir> on each host, named <name> in namespace ns.
type dialectProc struct{ ns, name, dir string }

func (p dialectProc) install(t *testing.T, hosts ...*testbed.Host) {
	t.Helper()
	for _, h := range hosts {
		installNamedApp(t, h, p.dir, p.name)
	}
}

// meta carries CMDB integer ids as label values, as the process-config
// manager sends them.
func (p dialectProc) meta() map[string]any {
	return map[string]any{"namespace": p.ns, "name": p.name,
		"labels": map[string]any{"proc_name": p.name, "bk_module_id": 42, "bk_process_id": 7}}
}

// spec is a full spec as the node manager sends it: alive_monitor_policy
// with "op_timeout": null, no resource, and an identity index_key.
func (p dialectProc) spec() map[string]any {
	d := "/data/" + p.dir
	return map[string]any{
		"identity": map[string]any{"index_key": "", "proc_name": p.name, "setup_path": d,
			"pid_path": d + "/" + p.name + ".pid", "config_path": "", "log_path": "", "user": "root"},
		"control": map[string]any{"start_cmd": "./start.sh", "stop_cmd": "./stop.sh", "restart_cmd": "./restart.sh",
			"reload_cmd": "./reload.sh", "kill_cmd": "./kill.sh", "version_cmd": "./version.sh", "health_cmd": "./health.sh"},
		"alive_monitor_policy": map[string]any{"auto_type": 1, "start_check_secs": 1, "stop_check_secs": 1,
			"start_retries": 3, "start_interval": 20, "crontab_rule": "", "op_timeout": nil},
		"warn_report_policy": map[string]any{"report_id": 0},
	}
}

// probeSpec is the spec a status probe carries: only proc_name, every other
// field empty or 0 (even auto_type).
func (p dialectProc) probeSpec() map[string]any {
	return map[string]any{
		"identity": map[string]any{"index_key": "", "proc_name": p.name, "setup_path": "", "pid_path": "", "user": ""},
		"control":  map[string]any{"start_cmd": "", "stop_cmd": "", "restart_cmd": "", "reload_cmd": "", "kill_cmd": ""},
		"resource": map[string]any{"cpu": 0, "mem": 0},
		"alive_monitor_policy": map[string]any{"auto_type": 0, "start_check_secs": 0, "stop_check_secs": 0,
			"start_retries": 0, "start_interval": 0, "crontab_rule": "", "op_timeout": 0},
	}
}

// v1Key and v2Key are the reference's result keys for a host named by
// (cloud 0, ip); agentKey for one named by agent id.
func (p dialectProc) v1Key(h *testbed.Host) string { return "0:0:" + h.IP + ":" + p.ns + ":" + p.name }
func (p dialectProc) v2Key(h *testbed.Host) string { return "0:" + h.IP + ":" + p.ns + ":" + p.name }
func (p dialectProc) agentKey(id string) string    { return id + ":" + p.ns + ":" + p.name }

func (p dialectProc) v1Keys(hs ...*testbed.Host) []string {
	var out []string
	for _, h := range hs {
		out = append(out, p.v1Key(h))
	}
	return out
}

func (p dialectProc) v2Keys(hs ...*testbed.Host) []string {
	var out []string
	for _, h := range hs {
		out = append(out, p.v2Key(h))
	}
	return out
}

// dialectHosts are hosts[] items without bk_supplier_id, with the CMDB host
// id callers add.
func dialectHosts(hs ...*testbed.Host) []map[string]any {
	var out []map[string]any
	for _, h := range hs {
		out = append(out, map[string]any{"ip": h.IP, "bk_cloud_id": 0, "bk_host_id": 1000 + h.Index})
	}
	return out
}

// withUnknown adds fields callers send that drover must ignore.
func withUnknown(body map[string]any) map[string]any {
	body["no_request"] = true
	body["nodeman_spec"] = map[string]any{"version": "2.0.0", "category": "official"}
	return body
}

// ---- the suite ----

// contractBed is two sshd hosts, the first mapped in the inventory under an
// opaque GSE 2.0 agent id, with a worker and a `starter serve` that both
// read that inventory.
type contractBed struct {
	e     *env
	gse   *gseCaller
	h0    *testbed.Host // has the opaque agent id agent
	h1    *testbed.Host // named by "0:<ip>"
	agent string
}

func newContractBed(t *testing.T) *contractBed {
	t.Helper()
	e := newEnv(t, 2)
	b := &contractBed{e: e, h0: e.bed.Hosts[0], h1: e.bed.Hosts[1], agent: randomHex(t, 18)}
	e.writeInventory([]map[string]any{
		{"ip": b.h0.IP, "bk_cloud_id": 0, "agent_id": b.agent},
		{"ip": b.h1.IP, "bk_cloud_id": 0},
	}, nil)
	e.startWorker()
	srv := e.startServe(t, "contract-secret-"+randomHex(t, 8))
	b.gse = &gseCaller{url: srv.url, secret: srv.secret, poll: 2 * time.Second}
	return b
}

// hostAgentID is a host's GSE 2.0 agent id: the one the inventory maps, or
// "<cloud>:<ip>" for a host without one.
func (b *contractBed) hostAgentID(ip string) string {
	if ip == b.h0.IP {
		return b.agent
	}
	return "0:" + ip
}

// wantHostAgentID checks the bk_agent_id answered for a host the request
// named by hosts[]: the host's own GSE 2.0 id, the one the inventory maps,
// as an agent would report itself whichever way the caller named it; a host
// without one reports "<cloud>:<ip>". Reported once per host and check, and
// without stopping the subtest, so the rest of it still runs.
func (b *contractBed) wantHostAgentID(t *testing.T, where, ip, got string) {
	t.Helper()
	if want := b.hostAgentID(ip); got != want {
		once(t, where+ip, "%s on %s (named by hosts[]): bk_agent_id %q, want the host's agent id %q", where, ip, got, want)
	}
}

var (
	onceMu   sync.Mutex
	onceSeen = map[string]bool{}
)

// once reports a failure without stopping the test, the first time only.
func once(t *testing.T, key, format string, args ...any) {
	t.Helper()
	onceMu.Lock()
	defer onceMu.Unlock()
	if k := t.Name() + "\x00" + key; !onceSeen[k] {
		onceSeen[k] = true
		t.Errorf(format, args...)
	}
}

func TestContractCallerDialect(t *testing.T) {
	// Beside the suite's other parallel tests: it mostly waits on 1 s result polls.
	t.Parallel()
	b := newContractBed(t)
	g, h0, h1 := b.gse, b.h0, b.h1
	g.poll = time.Second // faster than callers, to keep the suite short
	both := []*testbed.Host{h0, h1}

	t.Run("Authentication", func(t *testing.T) {
		// Only the header authenticates here, on every route; the answer's
		// shape is another subtest's business.
		body := map[string]any{"meta": map[string]any{"namespace": "contract", "name": "auth"},
			"hosts": []map[string]any{{"ip": h0.IP, "bk_cloud_id": 0, "bk_supplier_id": 0}}}
		for path := range contractPaths {
			var d any
			g.call(t, "get_proc_status", path, body, &d)
			status, out := g.raw(t, "get_proc_status", path, body, "not-the-secret")
			var env gseEnvelope
			if err := decodeStrict(out, &env); err != nil || status != http.StatusUnauthorized || env.Result || env.Code == 0 {
				t.Fatalf("a wrong secret in X-Bkapi-Authorization at %s: HTTP %d %s (%v), want 401 and result false",
					fmt.Sprintf(contractPaths[path], "get_proc_status"), status, out, err)
			}
		}
	})

	t.Run("UpdateRegistersThenRegisterAnswers850", func(t *testing.T) {
		p := dialectProc{ns: "contract", name: "upd", dir: "contract-upd"}
		body := func() map[string]any {
			return withUnknown(map[string]any{"meta": p.meta(), "hosts": dialectHosts(both...), "spec": p.spec()})
		}
		keys := p.v1Keys(both...)
		// The node manager registers through update_proc_info.
		wantCodes(t, "update_proc_info of an unregistered process", g.keyed(t, "update_proc_info", 0, body(), keys), gseSuccess, keys...)
		for path := range contractPaths {
			wantCodes(t, "register_proc_info after update", g.keyed(t, "register_proc_info", path, body(), keys), gseAlreadyExists, keys...)
		}
		for path := range contractPaths {
			wantCodes(t, "update_proc_info of a registered process", g.keyed(t, "update_proc_info", path, body(), keys), gseSuccess, keys...)
		}
		for path := range contractPaths {
			wantCodes(t, "unregister_proc_info", g.keyed(t, "unregister_proc_info", path, body(), keys), gseSuccess, keys...)
			wantCodes(t, "register_proc_info after unregister", g.keyed(t, "register_proc_info", path+1, body(), keys), gseSuccess, keys...)
		}
	})

	t.Run("OperateProcV2ByHosts", func(t *testing.T) {
		p := dialectProc{ns: "contract", name: "v2hosts", dir: "contract-v2hosts"}
		p.install(t, both...)
		op := func(opType, path int, spec map[string]any) (map[string]gseKeyed, map[string]gseKeyed) {
			t.Helper()
			task := g.operate(t, "operate_proc_v2", path, withUnknown(map[string]any{
				"meta": p.meta(), "hosts": dialectHosts(both...), "op_type": opType, "spec": spec}))
			return g.wait(t, task, path, p.v1Keys(both...), p.v2Keys(both...))
		}
		v2, v1 := op(0, 0, p.spec())
		wantCodes(t, "start", v2, gseSuccess, p.v2Keys(both...)...)
		for _, h := range both {
			for _, r := range []gseKeyed{v2[p.v2Key(h)], v1[p.v1Key(h)]} {
				c := controlOf(t, p.v2Key(h), r)
				if c.Value[0].ProcName != p.name || c.Value[0].Result != "success" {
					t.Fatalf("start content on %s: %+v", h.IP, c.Value[0])
				}
			}
		}
		for path := range contractPaths {
			spec := p.spec()
			if path%2 == 1 {
				spec = p.probeSpec()
			}
			v2, v1 := op(2, path, spec)
			wantCodes(t, "status", v2, gseSuccess, p.v2Keys(both...)...)
			for _, h := range both {
				for _, r := range []gseKeyed{v2[p.v2Key(h)], v1[p.v1Key(h)]} {
					c := v2StatusOf(t, p.v2Key(h), r)
					pid := runningPid(t, p.v2Key(h), c)
					if want := hostPid(t, h, "/data/"+p.dir+"/"+p.name+".pid"); pid != want {
						t.Fatalf("status on %s reports pid %d, the pid file holds %d", h.IP, pid, want)
					}
					if c.IP != h.IP || c.BkAgentID == "" {
						t.Fatalf("status content on %s: ip %q, bk_agent_id %q", h.IP, c.IP, c.BkAgentID)
					}
					b.wantHostAgentID(t, "status content", h.IP, c.BkAgentID)
				}
			}
		}
		// The codes callers branch on: start of what runs is 828, stop of
		// what does not run is 829, each with its control content.
		v2, _ = op(0, 2, p.spec())
		wantCodes(t, "second start", v2, gseAlreadyRunning, p.v2Keys(both...)...)
		v2, _ = op(1, 3, p.spec())
		wantCodes(t, "stop", v2, gseSuccess, p.v2Keys(both...)...)
		for _, h := range both {
			controlOf(t, p.v2Key(h), v2[p.v2Key(h)])
		}
		v2, _ = op(1, 0, p.spec())
		wantCodes(t, "second stop", v2, gseNotRunning, p.v2Keys(both...)...)
		for _, h := range both {
			k := p.v2Key(h)
			if want := "no need to stop the process(" + p.name + ") that is not running"; v2[k].ErrorMsg != want {
				t.Fatalf("second stop on %s: error_msg %q, want %q", h.IP, v2[k].ErrorMsg, want)
			}
			controlOf(t, k, v2[k])
		}
	})

	t.Run("AliveMonitorPolicyIsRead", func(t *testing.T) {
		// A program that lives 4 s: with alive_monitor_policy's
		// start_check_secs 1 it is alive at the check, where the default
		// 5 s would find it dead (836).
		p := dialectProc{ns: "contract", name: "brief", dir: "contract-brief"}
		d := "/data/" + p.dir
		if _, err := h0.Exec(fmt.Sprintf(`set -e; mkdir -p %[1]s
printf '#!/bin/sh\necho $$ > %[1]s/brief.pid\nsleep 4\n' > %[1]s/brief
printf '#!/bin/sh\ncd %[1]s && setsid ./brief </dev/null >/dev/null 2>&1 &\nsleep 0.2\n' > %[1]s/start.sh
chmod +x %[1]s/brief %[1]s/start.sh`, d)); err != nil {
			t.Fatal(err)
		}
		spec := p.spec()
		spec["control"] = map[string]any{"start_cmd": "./start.sh", "stop_cmd": "", "restart_cmd": "", "reload_cmd": "", "kill_cmd": ""}
		task := g.operate(t, "operate_proc_v2", 1, withUnknown(map[string]any{
			"meta": p.meta(), "hosts": dialectHosts(h0), "op_type": 0, "spec": spec}))
		v2, _ := g.wait(t, task, 1, p.v1Keys(h0), p.v2Keys(h0))
		wantCodes(t, "start with start_check_secs 1 of a program that lives 4 s", v2, gseSuccess, p.v2Keys(h0)...)
		// No restarts of it after the test: it is unregistered.
		g.keyed(t, "unregister_proc_info", 1, map[string]any{"meta": p.meta(), "hosts": dialectHosts(h0), "spec": spec}, p.v1Keys(h0))
	})

	t.Run("OperateProcV2ByAgentID", func(t *testing.T) {
		p := dialectProc{ns: "contract", name: "v2agent", dir: "contract-v2agent"}
		p.install(t, both...)
		ids := []string{b.agent, "0:" + h1.IP}
		v2Keys := []string{p.agentKey(ids[0]), p.agentKey(ids[1])}
		op := func(opType, path int, spec map[string]any) (map[string]gseKeyed, map[string]gseKeyed) {
			t.Helper()
			// hosts is ignored when agent_id_list is present: the stray host
			// must not get a key.
			task := g.operate(t, "operate_proc_v2", path, withUnknown(map[string]any{
				"meta": p.meta(), "agent_id_list": ids, "op_type": opType, "spec": spec,
				"hosts": []map[string]any{{"ip": "10.255.255.1", "bk_cloud_id": 0}}}))
			return g.wait(t, task, path, p.v1Keys(both...), v2Keys)
		}
		v2, _ := op(0, 1, p.spec())
		wantCodes(t, "start by agent id", v2, gseSuccess, v2Keys...)
		for path := range contractPaths {
			v2, v1 := op(2, path, p.probeSpec())
			wantCodes(t, "status by agent id", v2, gseSuccess, v2Keys...)
			for i, h := range both {
				for _, r := range []gseKeyed{v2[v2Keys[i]], v1[p.v1Key(h)]} {
					c := v2StatusOf(t, v2Keys[i], r)
					runningPid(t, v2Keys[i], c)
					if c.BkAgentID != ids[i] || c.IP != h.IP {
						t.Fatalf("status content for agent %q: bk_agent_id %q, ip %q", ids[i], c.BkAgentID, c.IP)
					}
				}
			}
		}
		// restart and reload, as the process-config manager sends them.
		pidFile := "/data/" + p.dir + "/" + p.name + ".pid"
		before := []int{hostPid(t, h0, pidFile), hostPid(t, h1, pidFile)}
		v2, _ = op(7, 3, p.spec())
		wantCodes(t, "restart by agent id", v2, gseSuccess, v2Keys...)
		for i, h := range both {
			controlOf(t, v2Keys[i], v2[v2Keys[i]])
			if now := hostPid(t, h, pidFile); now == before[i] || !hostAlive(h, now) {
				t.Fatalf("restart on %s: pid %d before, %d after", h.IP, before[i], now)
			}
		}
		v2, _ = op(8, 0, p.spec())
		wantCodes(t, "reload by agent id", v2, gseSuccess, v2Keys...)
		for i, h := range both {
			controlOf(t, v2Keys[i], v2[v2Keys[i]])
			waitFor(t, 10*time.Second, "reload on "+h.IP, func() bool {
				out, _ := h.Exec("cat /data/" + p.dir + "/events 2>/dev/null || true")
				return strings.Contains(out, "reload")
			})
		}
		v2, _ = op(1, 2, p.spec())
		wantCodes(t, "stop by agent id", v2, gseSuccess, v2Keys...)
	})

	t.Run("OperateProcMetaForm", func(t *testing.T) {
		p := dialectProc{ns: "contract", name: "meta", dir: "contract-meta"}
		p.install(t, both...)
		keys := p.v1Keys(both...)
		wantCodes(t, "register_proc_info", g.keyed(t, "register_proc_info", 2, withUnknown(map[string]any{
			"meta": p.meta(), "hosts": dialectHosts(both...), "spec": p.spec()}), keys), gseSuccess, keys...)
		// The older node-manager client posts the operate_process body here.
		op := func(opType, path int) map[string]gseKeyed {
			t.Helper()
			task := g.operate(t, "operate_proc", path, withUnknown(map[string]any{
				"meta": p.meta(), "hosts": dialectHosts(both...), "op_type": opType}))
			_, v1 := g.wait(t, task, path, keys, p.v2Keys(both...))
			return v1
		}
		// Registered and not started: status answers 829, the code the
		// reference lists for "not running", with the content still
		// carrying one process[] entry whose pid is -1, which callers
		// compare with -1 exactly.
		v1 := op(2, 1)
		for _, k := range keys {
			if v1[k].ErrorCode != gseNotRunning || !strings.Contains(v1[k].ErrorMsg, "is not running") {
				t.Fatalf("status of a registered process not running: %s answers %d %q, want 829 ... is not running",
					k, v1[k].ErrorCode, v1[k].ErrorMsg)
			}
			for _, in := range v2StatusOf(t, k, v1[k]).Process[0].Instance {
				if in.Pid != -1 {
					t.Fatalf("%s: status of a process never started reports pid %d, want -1", k, in.Pid)
				}
			}
		}
		wantCodes(t, "start through operate_proc", op(0, 3), gseSuccess, keys...)
		for path := range contractPaths {
			v1 := op(2, path)
			wantCodes(t, "status through operate_proc", v1, gseSuccess, keys...)
			for _, k := range keys {
				runningPid(t, k, v2StatusOf(t, k, v1[k]))
			}
		}
		wantCodes(t, "stop through operate_proc", op(1, 0), gseSuccess, keys...)

		// Both forms in one body, or neither, is a bad request naming the fields.
		seedForm := map[string]any{"bk_biz_id": 1, "op_type": 2, "process_infos": []map[string]any{{
			"setup_path": "/data/" + p.dir, "proc_name": p.name, "pid_path": "/data/" + p.dir + "/" + p.name + ".pid",
			"ip_list": []map[string]any{{"bk_cloud_id": 0, "ip": h0.IP}}}}}
		mixed := map[string]any{"meta": p.meta(), "hosts": dialectHosts(h0)}
		for k, v := range seedForm {
			mixed[k] = v
		}
		for _, api := range []string{"operate_proc", "operate_proc_v2"} {
			for name, body := range map[string]map[string]any{"both": mixed, "neither": {"op_type": 2}} {
				status, out := g.raw(t, api, 0, body, g.secret)
				var env gseEnvelope
				if err := decodeStrict(out, &env); err != nil || status != http.StatusBadRequest || env.Result ||
					!strings.Contains(env.Message, "meta") || !strings.Contains(env.Message, "process_infos") {
					t.Fatalf("%s with %s forms: HTTP %d %s (%v), want 400 naming meta and process_infos", api, name, status, out, err)
				}
			}
		}
	})

	t.Run("OperateProcMulti", func(t *testing.T) {
		on := dialectProc{ns: "contract", name: "multi", dir: "contract-multi"}
		off := dialectProc{ns: "contract", name: "multi-none", dir: "contract-multi-none"}
		on.install(t, both...)
		req := func(p dialectProc, opType int, spec map[string]any) map[string]any {
			return map[string]any{"meta": p.meta(), "hosts": dialectHosts(both...), "op_type": opType, "spec": spec}
		}
		v1Keys := append(on.v1Keys(both...), off.v1Keys(both...)...)
		v2Keys := append(on.v2Keys(both...), off.v2Keys(both...)...)
		task := g.operate(t, "operate_proc_multi", 0, withUnknown(map[string]any{"proc_operate_req": []any{req(on, 0, on.spec())}}))
		v2, _ := g.wait(t, task, 0, on.v1Keys(both...), on.v2Keys(both...))
		wantCodes(t, "start through operate_proc_multi", v2, gseSuccess, on.v2Keys(both...)...)
		// A status probe of a registered process answers its status; of a
		// process registered nowhere, "not registered" for each key, never a
		// 400 for the whole request.
		for path := range contractPaths {
			task := g.operate(t, "operate_proc_multi", path, withUnknown(map[string]any{
				"proc_operate_req": []any{req(on, 2, on.probeSpec()), req(off, 2, off.probeSpec())}}))
			v2, v1 := g.wait(t, task, path, v1Keys, v2Keys)
			wantCodes(t, "status probe of a registered process", v2, gseSuccess, on.v2Keys(both...)...)
			wantCodes(t, "status probe of an unregistered process", v2, gseNotRegistered, off.v2Keys(both...)...)
			for _, k := range on.v1Keys(both...) {
				runningPid(t, k, v2StatusOf(t, k, v1[k]))
			}
		}
		task = g.operate(t, "operate_proc_multi", 1, withUnknown(map[string]any{"proc_operate_req": []any{req(on, 1, on.spec())}}))
		v2, _ = g.wait(t, task, 1, on.v1Keys(both...), on.v2Keys(both...))
		wantCodes(t, "stop through operate_proc_multi", v2, gseSuccess, on.v2Keys(both...)...)
	})

	t.Run("GetProcStatus", func(t *testing.T) {
		p := dialectProc{ns: "contract", name: "query", dir: "contract-query"}
		p.install(t, both...)
		keys := p.v1Keys(both...)
		wantCodes(t, "register_proc_info", g.keyed(t, "register_proc_info", 0, withUnknown(map[string]any{
			"meta": p.meta(), "hosts": dialectHosts(both...), "spec": p.spec()}), keys), gseSuccess, keys...)
		// Registered, not started: stopped (status 2), no pid.
		var before gseStatusData
		g.call(t, "get_proc_status", 1, map[string]any{"meta": p.meta(), "hosts": dialectHosts(both...)}, &before)
		if len(before.ProcInfos) != 2 {
			t.Fatalf("get_proc_status: %d proc_infos, want 2: %+v", len(before.ProcInfos), before.ProcInfos)
		}
		for _, in := range before.ProcInfos {
			if in.Status != 2 || in.Pid > 0 {
				t.Fatalf("get_proc_status of a registered process never started: status %d pid %d, want 2 (stopped) and no pid", in.Status, in.Pid)
			}
		}
		task := g.operate(t, "operate_proc_v2", 0, map[string]any{"meta": p.meta(), "hosts": dialectHosts(both...), "op_type": 0, "spec": p.spec()})
		v2, _ := g.wait(t, task, 0, keys, p.v2Keys(both...))
		wantCodes(t, "start", v2, gseSuccess, p.v2Keys(both...)...)
		pids := map[string]int{}
		for _, h := range both {
			pids[h.IP] = hostPid(t, h, "/data/"+p.dir+"/"+p.name+".pid")
		}
		checkLabels := func(where string, labels map[string]any) {
			t.Helper()
			if n, ok := labels["bk_module_id"].(float64); !ok || n != 42 {
				once(t, where+" labels", "%s: meta.labels %v, want the integer label bk_module_id kept as sent (42)", where, labels)
			}
		}

		for path := range contractPaths {
			var d gseStatusData
			g.call(t, "get_proc_status", path, withUnknown(map[string]any{"meta": p.meta(), "hosts": dialectHosts(both...)}), &d)
			if len(d.ProcInfos) != 2 {
				t.Fatalf("get_proc_status: %d proc_infos, want 2: %+v", len(d.ProcInfos), d.ProcInfos)
			}
			for _, in := range d.ProcInfos {
				if in.Meta.Namespace != p.ns || in.Meta.Name != p.name || in.Status != 1 || in.Pid != pids[in.Host.IP] || in.Host.BkSupplierID != 0 {
					t.Fatalf("get_proc_status entry: %+v, want status 1 and pid %d", in, pids[in.Host.IP])
				}
				checkLabels("get_proc_status", in.Meta.Labels)
			}
		}

		byHosts := withUnknown(map[string]any{"meta": p.meta(), "hosts": dialectHosts(both...)})
		byAgent := withUnknown(map[string]any{"meta": p.meta(), "agent_id_list": []string{b.agent, "0:" + h1.IP}})
		for path := range contractPaths {
			for how, body := range map[string]map[string]any{"hosts": byHosts, "agent_id_list": byAgent} {
				var d gseStatusDataV2
				g.call(t, "get_proc_status_v2", path, body, &d)
				if len(d.ProcInfos) != 2 {
					t.Fatalf("get_proc_status_v2 by %s: %d proc_infos, want 2: %+v", how, len(d.ProcInfos), d.ProcInfos)
				}
				for _, in := range d.ProcInfos {
					want := b.hostAgentID(in.Host.IP)
					if in.BkAgentID == "" || in.BkAgentID != in.Host.BkAgentID {
						t.Fatalf("get_proc_status_v2 by %s: bk_agent_id %q, host.bk_agent_id %q", how, in.BkAgentID, in.Host.BkAgentID)
					}
					if how == "agent_id_list" {
						if in.BkAgentID != want {
							t.Fatalf("get_proc_status_v2 by agent_id_list: bk_agent_id %q, want the id as sent, %q", in.BkAgentID, want)
						}
					} else {
						b.wantHostAgentID(t, "get_proc_status_v2 by hosts", in.Host.IP, in.BkAgentID)
					}
					if in.Status != 1 || in.Pid != pids[in.Host.IP] {
						t.Fatalf("get_proc_status_v2 by %s entry: %+v, want status 1 and pid %d", how, in, pids[in.Host.IP])
					}
					checkLabels("get_proc_status_v2", in.Meta.Labels)
				}
			}
		}

		for path := range contractPaths {
			var d gseSyncData
			g.call(t, "sync_proc_status", path, withUnknown(map[string]any{"meta": map[string]any{"namespace": p.ns},
				"page": map[string]any{"start": 0, "limit": 1000}}), &d)
			found := 0
			for _, in := range d.ProcInfos {
				if in.Meta.Name == p.name && in.Status == 1 && in.Pid == pids[in.Host.IP] {
					found++
				}
			}
			if found != 2 || d.Count < len(d.ProcInfos) {
				t.Fatalf("sync_proc_status: count %d, %d running entries of %s, want 2: %+v", d.Count, found, p.name, d.ProcInfos)
			}
		}
	})
}

// TestContractStrictDecode checks the decoder the suite relies on: the
// reference's own status content decodes, and each way a Go caller would
// fail on it fails here too.
func TestContractStrictDecode(t *testing.T) {
	good := `{"ip":"10.0.0.1","bk_agent_id":"0:10.0.0.1","utctime":"2024-01-01 00:00:00","utctime2":"2024-01-01 00:00:00","timezone":8,
"process":[{"procname":"proc-test","instance":[{"cmdline":"./proc-test","processName":"proc-test","version":"1.2.3","health":"1","isAuto":true,
"cpuUsage":0.5,"cpuUsageAve":0.5,"phyMemUsage":1,"usePhyMem":1024,"diskSize":0,"pid":1234,"startTime":"1700000000","stat":"S",
"utime":"1","stime":"1","threadCount":1,"elapsedTime":10,"register_time":1,"last_start_time":1,"report_time":1}]}]}`
	var c gseStatusContent
	if err := decodeStrict([]byte(good), &c); err != nil || c.Process[0].Instance[0].Pid != 1234 {
		t.Fatalf("the reference's own shape: %v %+v", err, c)
	}
	for what, edit := range map[string][2]string{
		"timezone as a string":  {`"timezone":8`, `"timezone":"UTC+0800"`},
		"health as a number":    {`"health":"1"`, `"health":1`},
		"startTime as a number": {`"startTime":"1700000000"`, `"startTime":1700000000`},
		"pid as a float":        {`"pid":1234`, `"pid":1234.5`},
		"pid null":              {`"pid":1234`, `"pid":null`},
		"bk_agent_id missing":   {`"bk_agent_id":"0:10.0.0.1",`, ``},
		"isAuto as a number":    {`"isAuto":true`, `"isAuto":1`},
		"utctime2 missing":      {`"utctime2":"2024-01-01 00:00:00",`, ``},
	} {
		bad := strings.Replace(good, edit[0], edit[1], 1)
		if bad == good {
			t.Fatalf("%s: edit did not apply", what)
		}
		var c gseStatusContent
		if err := decodeStrict([]byte(bad), &c); err == nil {
			t.Errorf("%s: decoded without error", what)
		}
	}
}
