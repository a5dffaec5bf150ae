// Package e2e drives drover end to end: real sshd hosts from the test bed,
// a real Temporal dev server, the worker and the starter CLI.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"gopkg.in/yaml.v3"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// server is one dev server shared by the package's tests; each test has its
// own task queue, worker and hosts, so tests stay independent.
var server *testbed.Temporal

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(0)
	}
	// The default content store is per user: the package's own, not
	// the home directory's.
	data, err := os.MkdirTemp("", "drover-e2e-data-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	os.Setenv("XDG_DATA_HOME", data)
	server, err = testbed.StartTemporal(testbed.TemporalOptions{SearchAttributes: workflows.SearchAttributeTypes, SQLitePragmas: serverPragmas})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = server.Stop()
	_ = os.RemoveAll(data)
	os.Exit(code)
}

// serverPragmas are the dev server's SQLite pragmas; the scale tests set
// them (scale_pragmas_test.go).
var serverPragmas []string

var queueSeq atomic.Int64

var (
	binMu    sync.Mutex
	binPaths = map[string]string{}
)

// dial opens a client of the test's own, independent of any worker.
func (e *env) dial(t *testing.T) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: e.cfg.TemporalAddress, Logger: quietLog{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type quietLog struct{}

func (quietLog) Debug(string, ...any) {}
func (quietLog) Info(string, ...any)  {}
func (quietLog) Warn(string, ...any)  {}
func (quietLog) Error(string, ...any) {}

type env struct {
	t      *testing.T
	bed    *testbed.Bed
	cfg    config.Config
	worker *cli.Worker
	client client.Client
	// hostIDs are the host workflows of every inventory the test used.
	hostIDs map[string]bool
}

// newEnv starts hosts and a worker reading the inventory at invPath (the
// bed's own when empty).
func newEnv(t *testing.T, hosts int) *env {
	t.Helper()
	return newEnvWith(t, testbed.Options{Hosts: hosts}, server.Address)
}

// newEnvWith is newEnv with test-bed options and a dev server of its own.
func newEnvWith(t *testing.T, opts testbed.Options, temporalAddress string) *env {
	t.Helper()
	bed := testbed.New(t, opts)
	e := &env{t: t, bed: bed}
	e.cfg = config.Config{
		TemporalAddress:   temporalAddress,
		TemporalNamespace: "default",
		TaskQueue:         fmt.Sprintf("e2e-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), queueSeq.Add(1)),
		Inventory:         bed.InventoryPath,
		LogFormat:         "text",
		LogLevel:          "error",
		SuperviseInterval: time.Second,
		LimitPolls:        3,
		WatchShards:       4,
	}
	e.hostIDs = map[string]bool{}
	e.noteHosts(bed.InventoryPath)
	e.client = e.dial(t)
	t.Cleanup(e.endHostWorkflows)
	return e
}

// startWorker starts the worker; call it after any inventory change.
func (e *env) startWorker() {
	e.t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("DROVER_E2E_WORKER_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	w, err := cli.StartWorker(e.cfg, logger)
	if err != nil {
		e.t.Fatalf("start worker: %v", err)
	}
	e.worker = w
	e.t.Cleanup(w.Stop)
}

// endHostWorkflows deletes the host workflows of this test's hosts:
// test-bed addresses are reused by later tests, whose host workflows must
// start afresh on their own queue. Terminating is not enough: a closed host
// workflow is never replaced (its ops answer 9108).
func (e *env) endHostWorkflows() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A client of its own: the test's may be closed by now.
	c, err := client.Dial(client.Options{HostPort: e.cfg.TemporalAddress, Logger: quietLog{}})
	if err != nil {
		return // the server is gone, and its workflows with it
	}
	defer c.Close()
	ids := maps.Clone(e.hostIDs)
	for n := range e.cfg.WatchShards {
		ids[workflows.ShardID(e.cfg.WatchQueue(), n)] = true
	}
	for id := range ids {
		deleteWorkflow(ctx, e.t, c, e.cfg.TemporalNamespace, id)
	}
}

// deleteWorkflow deletes a workflow (terminating it if it runs) and waits
// until the server no longer finds it: deletion is asynchronous.
func deleteWorkflow(ctx context.Context, t *testing.T, c client.Client, namespace, id string) {
	var nf *serviceerror.NotFound
	_, err := c.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace: namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id}})
	if errors.As(err, &nf) {
		return
	}
	if err != nil {
		t.Logf("delete %s: %v", id, err)
		return
	}
	for ctx.Err() == nil {
		if _, err := c.DescribeWorkflowExecution(ctx, id, ""); errors.As(err, &nf) {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling the server, not proving anything
	}
	t.Logf("delete %s: still there after the cleanup's deadline", id)
}

// noteHosts remembers an inventory's host workflows for cleanup (the file
// itself may be gone by then).
func (e *env) noteHosts(path string) {
	inv, err := inventory.Load(path)
	if err != nil {
		e.t.Fatalf("inventory %s: %v", path, err)
	}
	for _, h := range inv.Hosts() {
		e.hostIDs[workflows.HostWorkflowID(h.ID())] = true
	}
}

// register stores spec for (ns, name) on each host, as register_proc_info does.
func (e *env) register(ns, name string, spec proc.Spec, targets ...proc.Target) {
	e.t.Helper()
	items := make([]proc.Item, len(targets))
	for i, tg := range targets {
		s := spec
		items[i] = proc.Item{Target: tg, Process: proc.ProcessID{Namespace: ns, Name: name}, Spec: &s}
	}
	res := e.runOperate(workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpSpecRegister, Items: items})
	for _, r := range res.Results {
		if r.Code != proc.CodeSuccess {
			e.t.Fatalf("register %s: %+v", r.Key, r.HostResult)
		}
	}
}

// sampleSpec is the spec of a sample started by testbed.Host.StartSample.
func sampleSpec(ns, name string) proc.Spec {
	return proc.Spec{ProcName: name, SetupPath: "/data/" + ns, PidPath: "/data/" + ns + "/" + name + ".pid"}
}

// writeInventory replaces the worker's inventory with hosts (maps in the
// file schema) plus optional clouds.
func (e *env) writeInventory(hosts []map[string]any, clouds map[string]any) {
	e.t.Helper()
	doc := map[string]any{
		"known_hosts": e.bed.KnownHostsPath,
		"defaults":    map[string]any{"user": "root", "port": 22, "identity_file": e.bed.ClientKeyPath},
		"hosts":       hosts,
	}
	if clouds != nil {
		doc["clouds"] = clouds
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		e.t.Fatal(err)
	}
	path := filepath.Join(e.t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		e.t.Fatal(err)
	}
	e.cfg.Inventory = path
	e.noteHosts(path)
}

// starter runs the starter CLI in-process with the env's settings.
func (e *env) starter(stdin string, args ...string) (string, string, int) {
	e.t.Helper()
	full := append([]string{}, args...)
	full = append(full, "--temporal-address", e.cfg.TemporalAddress, "--task-queue", e.cfg.TaskQueue, "--inventory", e.cfg.Inventory)
	var out, errOut bytes.Buffer
	root := cli.NewStarter(&out, &errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(full)
	code := cli.ExitOK
	if err := root.Execute(); err != nil {
		code = cli.ExitCodeOf(err)
		fmt.Fprintln(&errOut, "starter:", err) // as cli.Execute prints it
	}
	return out.String(), errOut.String(), code
}

// resultResponse is get_proc_operate_result's documented shape.
type resultResponse struct {
	Result  bool                       `json:"result"`
	Code    int                        `json:"code"`
	Message string                     `json:"message"`
	Data    map[string]hostResultEntry `json:"data"`
}

type hostResultEntry struct {
	ErrorCode int    `json:"error_code"`
	ErrorMsg  string `json:"error_msg"`
	Content   string `json:"content"`
}

// statusContent is the documented status content (the GSE 2.0 agent's
// types), decoded from its string.
type statusContent struct {
	IP       string `json:"ip"`
	AgentID  string `json:"bk_agent_id"`
	UTCTime  string `json:"utctime"`
	UTCTime2 string `json:"utctime2"`
	Timezone int    `json:"timezone"`
	Process  []struct {
		ProcName string `json:"procname"`
		Instance []struct {
			ProcessName string  `json:"processName"`
			Pid         int     `json:"pid"`
			CPUUsage    float64 `json:"cpuUsage"`
			PhyMemUsage float64 `json:"phyMemUsage"`
			UsePhyMem   uint64  `json:"usePhyMem"`
			StartTime   string  `json:"startTime"` // unix seconds, in decimal
			ThreadCount int     `json:"threadCount"`
			Cmdline     string  `json:"cmdline"`
		} `json:"instance"`
	} `json:"process"`
}

// startUnix reads the status content's startTime, unix seconds in a string.
func startUnix(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("startTime %q is not unix seconds: %v", s, err)
	}
	return n
}

func decodeResult(t *testing.T, out string) resultResponse {
	t.Helper()
	var r resultResponse
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("response is not the documented JSON: %v\n%s", err, out)
	}
	return r
}

func decodeStatus(t *testing.T, content string) statusContent {
	t.Helper()
	var c statusContent
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		t.Fatalf("content is not the status document: %v\n%s", err, content)
	}
	if len(c.Process) != 1 || len(c.Process[0].Instance) != 1 {
		t.Fatalf("status content must hold one process with one instance: %s", content)
	}
	return c
}

// statusRequest builds a seed-000 status request for hosts (cloud, ip).
func statusRequest(ns, name string, hosts ...[2]any) string {
	var hs []map[string]any
	for _, h := range hosts {
		hs = append(hs, map[string]any{"ip": h[1], "bk_cloud_id": h[0], "bk_supplier_id": 0})
	}
	b, _ := json.Marshal(map[string]any{
		"bk_app_code": "e2e", "bk_username": "tester",
		"meta":    map[string]any{"namespace": ns, "name": name, "labels": map[string]string{"proc_name": name}},
		"op_type": 2,
		"hosts":   hs,
	})
	return string(b)
}

// runOperate starts an op through the workflow API directly, for inputs no
// GSE request shape can express yet, and waits for it.
func (e *env) runOperate(in workflows.OperateInput) workflows.OperateResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := engine.StartOperate(ctx, e.client, e.cfg.TaskQueue, in); err != nil {
		e.t.Fatal(err)
	}
	res, err := engine.WaitOperateAll(ctx, e.client, in.TaskID)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// recordHistory saves a workflow's history as JSON under
// $DROVER_RECORD_HISTORIES, for the replay tests in workflows/testdata.
func (e *env) recordHistory(id, name string) { e.recordRunHistory(id, "", name) }

// recordRunHistory is recordHistory of one run (the latest when runID is
// empty), such as a run that continued as new.
func (e *env) recordRunHistory(id, runID, name string) {
	dir := os.Getenv("DROVER_RECORD_HISTORIES")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := testbed.SaveHistory(ctx, e.client, id, runID, filepath.Join(dir, name+".json")); err != nil {
		e.t.Fatal(err)
	}
}
