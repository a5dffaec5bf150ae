package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// randomHex is a fresh marker or secret, so a hit can only be a leak.
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// temporalCLI runs the pinned temporal CLI against the server at addr.
func temporalCLI(t *testing.T, addr string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testbed.TemporalBinary(), append(args, "--address", addr, "--color", "never")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("temporal %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// workflowIDs lists the workflows matching query, every page.
func workflowIDs(t *testing.T, c client.Client, query string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []string
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			t.Fatalf("list %q: %v", query, err)
		}
		for _, ex := range resp.Executions {
			ids = append(ids, ex.Execution.WorkflowId)
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return ids
		}
	}
}

// workflowDump is what an operator with server access sees of a workflow:
// its full history and its description (memo, search attributes), as JSON.
func workflowDump(t *testing.T, addr, id string, extra ...string) string {
	t.Helper()
	show := temporalCLI(t, addr, append([]string{"workflow", "show", "--workflow-id", id, "--output", "json"}, extra...)...)
	desc := temporalCLI(t, addr, append([]string{"workflow", "describe", "--workflow-id", id, "--output", "json"}, extra...)...)
	return show + "\n" + desc
}

// leakForms are the ways a secret could show in a dump: as itself, and
// base64-encoded at each of the three byte alignments (payload data is
// base64 in JSON output).
func leakForms(secret string) []string {
	forms := []string{secret}
	for pad := 0; pad < 3; pad++ {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", pad) + secret))
		// Drop the characters that mix in neighbouring bytes.
		lead := (pad*4 + 2) / 3
		core := enc[lead:]
		core = strings.TrimRight(core, "=")
		if len(core) > 4 {
			core = core[:len(core)-3]
		}
		forms = append(forms, core)
	}
	return forms
}

// countLeaks counts occurrences of any form of secret in text.
func countLeaks(text, secret string) int {
	n := 0
	for _, f := range leakForms(secret) {
		n += strings.Count(text, f)
	}
	return n
}

// startCodecServer runs `starter codec-server` in-process until the test
// ends and returns its base URL.
func startCodecServer(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	root := cli.NewStarter(pw, io.Discard)
	root.SetArgs([]string{"codec-server", "--listen", "127.0.0.1:0", "--log-level", "error"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("codec-server: %v", err)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("codec-server printed no address: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return "http://" + strings.TrimSpace(line)
}

func TestPayloadEncryption(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "enc")
	t.Setenv("DROVER_E2E_CODEC_KEY", base64.StdEncoding.EncodeToString([]byte(randomHex(t, 16))))
	// The worker gets the setting in its config, the starter from the
	// environment, as operators would set it.
	e.cfg.CodecKeyEnv = "DROVER_E2E_CODEC_KEY"
	t.Setenv("DROVER_CODEC_KEY_ENV", "DROVER_E2E_CODEC_KEY")
	e.startWorker()

	cmdMarker, userMarker := "cmd-marker-"+randomHex(t, 6), "operator-marker-"+randomHex(t, 6)
	hosts := fmt.Sprintf(`"hosts":[{"ip":%q,"bk_cloud_id":0,"bk_supplier_id":0}]`, h.IP)
	meta := `"meta":{"namespace":"enc","name":"svc"}`
	register := `{"bk_username":"` + userMarker + `",` + meta + `,` + hosts + `,"spec":{` +
		`"identity":{"proc_name":"svc","setup_path":"/data/enc","pid_path":"/data/enc/svc.pid","user":"root"},` +
		`"control":{"start_cmd":"./start.sh # ` + cmdMarker + `","stop_cmd":"./stop.sh"},` +
		`"resource":{"cpu":0,"mem":0},"monitor_policy":{"auto_type":1,"start_check_secs":1}}}`
	out, errOut, code := e.starter(register, "api", "register_proc_info")
	if r := decodeResult(t, out); code != cli.ExitOK || r.Data[key(h.IP, "enc", "svc")].ErrorCode != 0 {
		t.Fatalf("register: %d %s %s", code, out, errOut)
	}
	for _, op := range []int{0, 2} {
		body := `{"bk_username":"` + userMarker + `",` + meta + `,"op_type":` + fmt.Sprint(op) + `,` + hosts + `}`
		out, errOut, code = e.starter(body, "api", "operate_process", "--wait")
		// The starter reads the encrypted results through the codec.
		if r := decodeResult(t, out); code != cli.ExitOK || r.Data[key(h.IP, "enc", "svc")].ErrorCode != 0 {
			t.Fatalf("op_type %d: %d %s %s", op, code, out, errOut)
		}
	}
	if c := decodeStatus(t, decodeResult(t, out).Data[key(h.IP, "enc", "svc")].Content); c.Process[0].Instance[0].Pid <= 0 {
		t.Fatalf("status through the codec: %+v", c)
	}
	// ps decodes the host workflow's encrypted memo with the same key.
	out, errOut, code = e.starter("", "ps", "-o", "json")
	var ps []struct{ Namespace, Name, Actual string }
	if err := json.Unmarshal([]byte(out), &ps); err != nil || code != cli.ExitOK || len(ps) != 1 || ps[0].Name != "svc" || ps[0].Actual != "running" {
		t.Fatalf("ps through the codec: exit %d %v\n%s%s", code, err, out, errOut)
	}

	ids := workflowIDs(t, e.client, onQueues(e.cfg.TaskQueue))
	if len(ids) < 4 { // three tasks and the host workflow
		t.Fatalf("workflows on the queue: %v", ids)
	}
	// A client without the key cannot read a task's result.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range ids {
		if strings.HasPrefix(id, "GSETASK:") {
			if _, err := engine.FetchOperate(ctx, e.client, id); err == nil {
				t.Fatalf("%s: read without the key", id)
			}
			break
		}
	}
	// Neither the command nor the operator shows in any history, memo or
	// search attribute.
	for _, id := range ids {
		dump := workflowDump(t, e.cfg.TemporalAddress, id)
		for _, m := range []string{cmdMarker, userMarker} {
			if n := countLeaks(dump, m); n != 0 {
				t.Errorf("%s: %q in plaintext %d times", id, m, n)
			}
		}
	}
	// Operators holding the key see them through the codec endpoint, the
	// way the UI (--ui-codec-endpoint) and the CLI (--codec-endpoint) ask.
	codecURL := startCodecServer(t)
	var all string
	for _, id := range ids {
		all += workflowDump(t, e.cfg.TemporalAddress, id, "--codec-endpoint", codecURL)
	}
	for _, m := range []string{cmdMarker, userMarker} {
		if countLeaks(all, m) == 0 {
			t.Errorf("%q not shown through the codec endpoint", m)
		}
	}
	// The UI's browser preflight is answered for the UI's origin.
	req, _ := http.NewRequest(http.MethodOptions, codecURL+"/decode", nil)
	req.Header.Set("Origin", "http://127.0.0.1:8233")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "http://127.0.0.1:8233" {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	t.Logf("%d workflows: no plaintext without the key; readable through the codec endpoint", len(ids))
}

// startBinary runs a drover binary with env added to a clean environment
// (no ssh-agent), stderr appended to logPath. Its stdout's first line is
// returned (serve and codec-server print their address there). Cleanup
// kills it by pid.
func startBinary(t *testing.T, name string, env []string, logPath string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(buildBinary(t, name), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") && !strings.HasPrefix(kv, "DROVER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		l, _ := r.ReadString('\n')
		lines <- strings.TrimSpace(l)
		_, _ = io.Copy(io.Discard, r)
	}()
	if name == "worker" { // it prints nothing on stdout
		return cmd, ""
	}
	select {
	case l := <-lines:
		return cmd, l
	case <-time.After(30 * time.Second):
		t.Fatalf("%s printed nothing", name)
	}
	return cmd, ""
}

// postJSON posts body to url with the given headers, decodes the JSON answer
// into out and returns the HTTP status.
func postJSON(t *testing.T, url, body string, header map[string]string, out any) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s: answer is not JSON: %v", url, err)
	}
	return resp.StatusCode
}

// encryptedKey writes a new key encrypted with passphrase and authorizes
// it on the bed's hosts.
func encryptedKey(t *testing.T, bed *testbed.Bed, passphrase string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "id_encrypted")
	if err := bed.AddEncryptedKey(path, passphrase); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSecretsNeverRecorded(t *testing.T) {
	dir := t.TempDir()
	serverLog, workerLog, apiLog := filepath.Join(dir, "server.log"), filepath.Join(dir, "worker.log"), filepath.Join(dir, "serve.log")
	// A dev server of its own: every workflow in its namespace is this
	// test's, and its log holds only this test's traffic.
	srv := testbed.NewTemporal(t, testbed.TemporalOptions{SearchAttributes: workflows.SearchAttributeTypes, LogFile: serverLog})
	e := newEnvWith(t, testbed.Options{Hosts: 2, PasswordAuth: true}, srv.Address)
	secrets := map[string]string{
		"bk_app_secret":  "app-secret-" + randomHex(t, 12),
		"host password":  "host-pw-" + randomHex(t, 12),
		"key passphrase": "key-pass-" + randomHex(t, 12),
	}
	restore, err := testbed.SetAppPassword(secrets["host password"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := restore(); err != nil {
			t.Error(err)
		}
	})
	h0, h1 := e.bed.Hosts[0], e.bed.Hosts[1]
	// Host 0: drover-app with a password, no key. Host 1: root with a
	// passphrase-protected key.
	inv := fmt.Sprintf(`known_hosts: %s
hosts:
  - {ip: %s, bk_cloud_id: 0, bk_supplier_id: 0, user: %s, password_env: DROVER_E2E_HOST_PW}
  - {ip: %s, bk_cloud_id: 0, bk_supplier_id: 0, user: root, identity_file: %s, passphrase_env: DROVER_E2E_KEY_PASS}
`, e.bed.KnownHostsPath, h0.IP, testbed.AppUser, h1.IP, encryptedKey(t, e.bed, secrets["key passphrase"]))
	e.cfg.Inventory = filepath.Join(dir, "inventory.yaml")
	conf := filepath.Join(dir, "drover.yaml")
	for path, text := range map[string]string{
		e.cfg.Inventory: inv,
		conf:            "apps:\n  - code: sec\n    secret_env: DROVER_E2E_APP_SECRET\n    namespaces: [sec]\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.noteHosts(e.cfg.Inventory)
	for _, h := range e.bed.Hosts {
		installApp(t, h, "sec")
		if _, err := h.Exec("chmod -R a+rwX /data/sec"); err != nil {
			t.Fatal(err)
		}
	}
	common := []string{"--temporal-address", srv.Address, "--task-queue", e.cfg.TaskQueue, "--inventory", e.cfg.Inventory,
		"--log-level", "debug", "--log-format", "json"}
	worker, _ := startBinary(t, "worker", []string{"DROVER_E2E_HOST_PW=" + secrets["host password"],
		"DROVER_E2E_KEY_PASS=" + secrets["key passphrase"]}, workerLog, common...)
	serve, addr := startBinary(t, "starter", []string{"DROVER_E2E_APP_SECRET=" + secrets["bk_app_secret"]}, apiLog,
		append([]string{"serve", "--listen", "127.0.0.1:0", "--config", conf}, common...)...)

	post := func(path, body string, header map[string]string) map[string]any {
		t.Helper()
		var out map[string]any
		if status := postJSON(t, "http://"+addr+path, body, header, &out); out["result"] != true {
			t.Fatalf("%s: %d %v", path, status, out)
		}
		return out
	}
	auth := `"bk_app_code":"sec","bk_app_secret":"` + secrets["bk_app_secret"] + `","bk_username":"alice",`
	hosts := fmt.Sprintf(`"hosts":[{"ip":%q,"bk_cloud_id":0,"bk_supplier_id":0},{"ip":%q,"bk_cloud_id":0,"bk_supplier_id":0}]`, h0.IP, h1.IP)
	meta := `"meta":{"namespace":"sec","name":"svc"}`
	out := post("/api/c/compapi/v2/gse/register_proc_info/", `{`+auth+meta+`,`+hosts+`,"spec":{`+
		`"identity":{"proc_name":"svc","setup_path":"/data/sec","pid_path":"/data/sec/svc.pid","user":"`+testbed.AppUser+`"},`+
		`"control":{"start_cmd":"./start.sh","stop_cmd":"./stop.sh"},"resource":{"cpu":0,"mem":0},`+
		`"monitor_policy":{"auto_type":1,"start_check_secs":1}}}`, nil)
	for _, h := range e.bed.Hosts {
		if r := out["data"].(map[string]any)[key(h.IP, "sec", "svc")].(map[string]any); r["error_code"] != float64(0) {
			t.Fatalf("register on %s: %v", h.IP, r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, op := range []int{0, 2, 1} { // start, status, stop
		out := post("/api/v2/proc/operate_process", `{"op_type":`+fmt.Sprint(op)+`,`+meta+`,`+hosts+`}`,
			// The API gateway's header carries the secret this time.
			map[string]string{"X-Bkapi-Authorization": `{"bk_app_code":"sec","bk_app_secret":"` + secrets["bk_app_secret"] + `","bk_username":"bob"}`})
		task := out["data"].(map[string]any)["task_id"].(string)
		res, err := engine.WaitOperateAll(ctx, e.client, task)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Results {
			if r.Code != 0 {
				t.Fatalf("op_type %d on %s: %+v", op, r.Key, r.HostResult)
			}
		}
		post("/api/v2/proc/get_proc_operate_result", `{`+auth+`"task_id":"`+task+`"}`, nil)
	}
	post("/api/v2/proc/get_proc_status", `{`+auth+meta+`,`+hosts+`}`, nil)
	post("/api/v2/proc/sync_proc_status", `{`+auth+`"meta":{"namespace":"sec"}}`, nil)

	// The secrets were really in use: loaded by the processes, and the
	// hosts accepted the password and the encrypted key.
	environ := func(cmd *exec.Cmd) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if env := environ(worker); !strings.Contains(env, secrets["host password"]) || !strings.Contains(env, secrets["key passphrase"]) {
		t.Fatal("the worker does not hold the host secrets: the test would prove nothing")
	}
	if !strings.Contains(environ(serve), secrets["bk_app_secret"]) {
		t.Fatal("serve does not hold the app secret")
	}
	for h, want := range map[*testbed.Host]string{h0: "Accepted password for " + testbed.AppUser, h1: "Accepted publickey for root"} {
		if b, _ := os.ReadFile(h.LogPath()); !strings.Contains(string(b), want) {
			t.Fatalf("%s: sshd log lacks %q", h.IP, want)
		}
	}

	// Every workflow in the namespace: history, memo, search attributes.
	ids := workflowIDs(t, e.client, "")
	if len(ids) < 7 { // register, three ops, get_proc_status, sync_proc_status, two hosts
		t.Fatalf("workflows: %v", ids)
	}
	var dumps strings.Builder
	for _, id := range ids {
		dumps.WriteString(workflowDump(t, srv.Address, id))
	}
	sources := map[string]string{"workflows": dumps.String()}
	for name, path := range map[string]string{"worker log": workerLog, "server log": serverLog, "API log": apiLog} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sources[name] = string(b)
	}
	found := 0
	for what, secret := range secrets {
		// The search itself must see a secret however it is encoded.
		for _, around := range []string{"", "a", "ab"} {
			if countLeaks(base64.StdEncoding.EncodeToString([]byte(around+secret+"z")), secret) == 0 {
				t.Fatalf("%s: base64 after %d bytes is not detected", what, len(around))
			}
		}
		for src, text := range sources {
			if n := countLeaks(text, secret); n > 0 {
				found += n
				t.Errorf("%s found %d times in the %s", what, n, src)
			}
		}
	}
	lines := func(s string) int { return strings.Count(s, "\n") }
	if lines(sources["API log"]) < 10 || !strings.Contains(sources["API log"], `"app":"sec"`) {
		t.Fatalf("the API access log is missing: %s", sources["API log"])
	}
	chaosCount(t, "secrets", found)
	t.Logf("secrets found: %d of %d secrets across %d workflows (%d bytes of history and descriptions), "+
		"worker log %d lines, server log %d lines, API log %d lines",
		found, len(secrets), len(ids), dumps.Len(), lines(sources["worker log"]), lines(sources["server log"]), lines(sources["API log"]))
}

// registerBody is a register_proc_info body with an identity and no control
// commands: drover then runs the job platform's `cd SETUP_PATH &&
// ./VERB.sh PROC_NAME`, building the command from the names themselves.
func registerBody(t *testing.T, ns, name, procName, setupPath, pidPath, user, ip string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"meta":  map[string]any{"namespace": ns, "name": name},
		"hosts": []map[string]any{{"ip": ip, "bk_cloud_id": 0, "bk_supplier_id": 0}},
		"spec": map[string]any{
			"identity":       map[string]any{"proc_name": procName, "setup_path": setupPath, "pid_path": pidPath, "user": user},
			"control":        map[string]any{},
			"resource":       map[string]any{"cpu": 0, "mem": 0},
			"monitor_policy": map[string]any{"auto_type": 1, "start_check_secs": 1, "stop_check_secs": 2},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func operateBody(t *testing.T, ns, name string, op int, ip string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"meta":    map[string]any{"namespace": ns, "name": name},
		"op_type": op,
		"hosts":   []map[string]any{{"ip": ip, "bk_cloud_id": 0, "bk_supplier_id": 0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNamesAndPathsReachTheShellLiterally(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	e.startWorker()
	tok := randomHex(t, 4)
	// Every value would create a canary file cTOK* if any shell ever
	// evaluated it: in the home directory ($(cd;touch ...)) or in the
	// working directory. Namespaces and names may not hold ':' or '/'.
	evil := func(prefix, tag string) string {
		return fmt.Sprintf(`%s 'q' "d" $(cd;touch c%[2]s%[3]s1) ;cd;touch c%[2]s%[3]s2; `+"`cd;touch c%[2]s%[3]s3`"+` $(touch c%[2]s%[3]s4) * ?[a-z] ~ &`, prefix, tok, tag)
	}
	// proc_name is a file name, so it alone may not hold a backslash.
	ns, name, procName := evil("ns", "ns")+` \`, evil("nm", "nm")+` \`, evil("svc", "pn")
	setupPath := "/data/" + evil("app", "sp") + ` \`
	pidPath := setupPath + "/" + evil("pid", "pp") + ".pid"

	// The app, written from Go so that nothing here goes through a shell:
	// the program named procName, start/stop/kill scripts that take
	// procName as $1 as the job platform's convention passes it, and the
	// pid file's path in a file.
	dir := filepath.Join(h.DataDir, strings.TrimPrefix(setupPath, "/data/"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, text := range map[string]string{
		procName:   "#!/bin/sh\ntrap 'exit 0' TERM\necho $$ > \"$(cat ./pidpath)\"\nwhile :; do sleep 1 & wait $!; done\n",
		"start.sh": "#!/bin/sh\nprintf '%s\\n' \"$1\" >> ./args\nsetsid sh \"./$1\" </dev/null >/dev/null 2>&1 &\nsleep 0.2\n",
		"stop.sh":  "#!/bin/sh\nkill \"$(cat \"$(cat ./pidpath)\")\"\n",
		"kill.sh":  "#!/bin/sh\nkill -9 \"$(cat \"$(cat ./pidpath)\")\"\n",
		"pidpath":  pidPath,
		"args":     "",
	} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	findCanaries := func() string {
		t.Helper()
		out, err := h.Exec("find / -xdev -name 'c" + tok + "*' 2>/dev/null; find /data /root /tmp -name 'c" + tok + "*' 2>/dev/null; true")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	canaries := func(when string) {
		t.Helper()
		if out := findCanaries(); out != "" {
			t.Fatalf("after %s: a value was evaluated by a shell: %q", when, out)
		}
	}
	// The search finds a canary in the home directory and the setup path.
	if _, err := h.Exec("cd && touch c" + tok + "probe && touch /data/c" + tok + "probe"); err != nil {
		t.Fatal(err)
	}
	if out := findCanaries(); strings.Count(out, "c"+tok+"probe") < 2 {
		t.Fatalf("canary search blind: %q", out)
	}
	if _, err := h.Exec("rm -f /root/c" + tok + "probe /data/c" + tok + "probe"); err != nil {
		t.Fatal(err)
	}
	api := func(apiName, body string, args ...string) resultResponse {
		t.Helper()
		out, errOut, code := e.starter(body, append([]string{"api", apiName}, args...)...)
		r := decodeResult(t, out)
		if code > cli.ExitHostsFailed || !r.Result {
			t.Fatalf("%s: exit %d %s %s", apiName, code, out, errOut)
		}
		return r
	}
	k := key(h.IP, ns, name)
	hostFile := filepath.Join(h.DataDir, strings.TrimPrefix(pidPath, "/data/"))
	step := func(what string, op int, wantCode int) hostResultEntry {
		t.Helper()
		r := api("operate_process", operateBody(t, ns, name, op, h.IP), "--wait").Data[k]
		if r.ErrorCode != wantCode {
			t.Fatalf("%s: %+v, want code %d", what, r, wantCode)
		}
		canaries(what)
		return r
	}

	if r := api("register_proc_info", registerBody(t, ns, name, procName, setupPath, pidPath, "root", h.IP)).Data[k]; r.ErrorCode != 0 {
		t.Fatalf("register: %+v", r)
	}
	canaries("register")
	step("start", 0, 0)
	// The pid file is at the literal path, and start.sh got procName as one
	// argument.
	b, err := os.ReadFile(hostFile)
	if err != nil {
		t.Fatalf("no pid file at the literal pid_path: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if !hostAlive(h, pid) {
		t.Fatalf("pid %d from the literal pid file is not running", pid)
	}
	if args, _ := os.ReadFile(filepath.Join(dir, "args")); string(args) != procName+"\n" {
		t.Fatalf("start.sh got %q, want %q", args, procName)
	}
	st := step("status", 2, 0)
	if got, _ := statusPid(t, proc.HostResult{Content: st.Content}); got != pid {
		t.Fatalf("status pid %d, want %d (the program named by proc_name)", got, pid)
	}
	// get_proc_status names the process by the literal values.
	out, _, code := e.starter(operateBody(t, ns, name, 2, h.IP), "api", "get_proc_status")
	var ps struct {
		Data struct {
			ProcInfos []struct {
				Meta        struct{ Namespace, Name string }
				Status, Pid int
			} `json:"proc_infos"`
		}
	}
	if err := json.Unmarshal([]byte(out), &ps); err != nil || code != cli.ExitOK || len(ps.Data.ProcInfos) != 1 {
		t.Fatalf("get_proc_status: %d %v %s", code, err, out)
	}
	if pi := ps.Data.ProcInfos[0]; pi.Meta.Namespace != ns || pi.Meta.Name != name || pi.Status != 1 || pi.Pid != pid {
		t.Fatalf("get_proc_status: %+v", pi)
	}
	canaries("get_proc_status")
	step("stop", 1, 0)
	if hostAlive(h, pid) {
		t.Fatal("stop left the process running")
	}
	step("start again", 0, 0)
	b, _ = os.ReadFile(hostFile)
	pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	step("kill", 9, 0)
	if hostAlive(h, pid) {
		t.Fatal("kill left the process running")
	}
	step("status after kill", 2, int(proc.CodeNotRunning))
	if r := api("unregister_proc_info", registerBody(t, ns, name, procName, setupPath, pidPath, "root", h.IP)).Data[k]; r.ErrorCode != 0 {
		t.Fatalf("unregister: %+v", r)
	}

	// An account with an inner space is a valid name: it reaches sudo as
	// one word, and sudo refuses the unknown user.
	if r := api("register_proc_info", registerBody(t, ns, "spaced", procName, setupPath, pidPath, "no such user", h.IP)).Data[key(h.IP, ns, "spaced")]; r.ErrorCode != 0 {
		t.Fatalf("register with a spaced account: %+v", r)
	}
	if r := api("operate_process", operateBody(t, ns, "spaced", 0, h.IP), "--wait").Data[key(h.IP, ns, "spaced")]; r.ErrorCode != int(proc.CodeSudoRefused) || !strings.Contains(r.ErrorMsg, "no such user") {
		t.Fatalf("start as a spaced account: %+v", r)
	}
	canaries("spaced account")

	// What the rules refuse is refused naming the field; nothing starts.
	before := e.countOperate(t)
	for _, c := range []struct{ body, field string }{
		{registerBody(t, "ns\n$(cd;touch c"+tok+"x)", name, procName, setupPath, pidPath, "root", h.IP), "meta.namespace"},
		{registerBody(t, ns, "nm\n;cd;touch c"+tok+"x", procName, setupPath, pidPath, "root", h.IP), "meta.name"},
		{registerBody(t, ns, name, "svc\n`cd;touch c"+tok+"x`", setupPath, pidPath, "root", h.IP), "spec.identity.proc_name"},
		{registerBody(t, ns, name, procName, setupPath+"\n;touch c"+tok+"x", pidPath, "root", h.IP), "spec.identity.setup_path"},
		{registerBody(t, ns, name, procName, setupPath, pidPath+"\n$(touch c"+tok+"x)", "root", h.IP), "spec.identity.pid_path"},
		{registerBody(t, ns, name, procName, setupPath, pidPath, "root;cd;touch c"+tok+"x", h.IP), "spec.identity.user"},
		{registerBody(t, ns, name, procName, setupPath, pidPath, "$(cd;touch c"+tok+"x)", h.IP), "spec.identity.user"},
		{registerBody(t, ns, name, procName, setupPath, pidPath, "'root'", h.IP), "spec.identity.user"},
	} {
		out, _, code := e.starter(c.body, "api", "register_proc_info")
		r := decodeResult(t, out)
		if code != cli.ExitBadRequest || r.Result || !strings.Contains(r.Message, "field "+c.field+":") {
			t.Errorf("%s: exit %d %s", c.field, code, out)
		}
	}
	if after := e.countOperate(t); after != before {
		t.Fatalf("refused requests started %d workflows", after-before)
	}
	canaries("refusals")
}

func TestNamespaceAllowListOverHTTP(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	if _, err := h.StartSample("web", "svc", ""); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	dir := t.TempDir()
	conf := filepath.Join(dir, "drover.yaml")
	if err := os.WriteFile(conf, []byte(`apps:
  - {code: web-team, secret_env: DROVER_E2E_WEB_SECRET, namespaces: [web, "5"]}
  - {code: ops, secret_env: DROVER_E2E_OPS_SECRET}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, addr := startBinary(t, "starter", []string{"DROVER_E2E_WEB_SECRET=web-s", "DROVER_E2E_OPS_SECRET=ops-s"},
		filepath.Join(dir, "serve.log"), "serve", "--listen", "127.0.0.1:0", "--config", conf,
		"--temporal-address", e.cfg.TemporalAddress, "--task-queue", e.cfg.TaskQueue)
	post := func(path, body string) (int, gseapiResponse) {
		t.Helper()
		var out gseapiResponse
		return postJSON(t, "http://"+addr+path, body, nil, &out), out
	}
	web := `"bk_app_code":"web-team","bk_app_secret":"web-s","bk_username":"alice",`
	ops := `"bk_app_code":"ops","bk_app_secret":"ops-s","bk_username":"root-op",`
	hosts := fmt.Sprintf(`"hosts":[{"ip":%q,"bk_cloud_id":0,"bk_supplier_id":0}]`, h.IP)
	ipList := fmt.Sprintf(`"ip_list":[{"ip":%q,"bk_cloud_id":0}]`, h.IP)
	spec := `"spec":{"identity":{"proc_name":"svc","setup_path":"/data/web","pid_path":"/data/web/svc.pid","user":"root"},` +
		`"control":{},"resource":{"cpu":0,"mem":0},"monitor_policy":{"auto_type":1}}`
	procInfo := `"process_infos":[{"setup_path":"/data/web","proc_name":"svc","pid_path":"/data/web/svc.pid","proc_owner":"root",` + ipList + `}]`
	meta := func(ns string) string { return `"meta":{"namespace":"` + ns + `","name":"svc"}` }

	// Every API that names a namespace, at both paths, with one outside
	// web-team's list: refused naming the field and the namespace.
	for _, c := range []struct{ path, body, field, ns string }{
		{"/api/c/compapi/v2/gse/operate_process/", `{` + web + meta("db") + `,"op_type":0,` + hosts + `}`, "meta.namespace", "db"},
		{"/api/v2/proc/operate_process", `{` + web + meta("db") + `,"op_type":2,` + hosts + `}`, "meta.namespace", "db"},
		{"/api/c/compapi/v2/gse/operate_proc/", `{` + web + `"bk_biz_id":7,"op_type":0,` + procInfo + `}`, "bk_biz_id", "7"},
		{"/api/v2/proc/operate_proc_v2", `{` + web + `"bk_biz_id":7,"op_type":0,` + procInfo + `}`, "bk_biz_id", "7"},
		{"/api/v2/proc/operate_proc_multi", `{` + web + `"proc_operate_req":[{` + meta("web") + `,"op_type":2,` + hosts + `},{` + meta("db") + `,"op_type":2,` + hosts + `}]}`, "proc_operate_req[1].meta.namespace", "db"},
		{"/api/c/compapi/v2/gse/manage_proc/", `{` + web + `"bk_scope_type":"biz","bk_scope_id":"7","op_type":0,` + procInfo + `}`, "bk_scope_id", "7"},
		{"/api/c/compapi/v2/gse/register_proc_info/", `{` + web + meta("db") + `,` + hosts + `,` + spec + `}`, "meta.namespace", "db"},
		{"/api/v2/proc/update_proc_info", `{` + web + meta("db") + `,` + hosts + `,` + spec + `}`, "meta.namespace", "db"},
		{"/api/v2/proc/unregister_proc_info", `{` + web + meta("db") + `,` + hosts + `}`, "meta.namespace", "db"},
		{"/api/c/compapi/v2/gse/get_proc_status/", `{` + web + meta("db") + `,` + hosts + `}`, "meta.namespace", "db"},
		{"/api/v2/proc/sync_proc_status", `{` + web + `"meta":{"namespace":"db"}}`, "meta.namespace", "db"},
	} {
		status, out := post(c.path, c.body)
		want := fmt.Sprintf(`field %s: namespace %q is not allowed for app "web-team"`, c.field, c.ns)
		if status != http.StatusForbidden || out.Result || out.Code != 1000004 || !strings.Contains(out.Message, want) {
			t.Errorf("%s: %d %+v, want 403 code 1000004 %q", c.path, status, out, want)
		}
	}
	// Nothing started: no workflow on the queue, not even the host's.
	if ids := workflowIDs(t, e.client, onQueues(e.cfg.TaskQueue)); len(ids) != 0 {
		t.Fatalf("refused calls started %v", ids)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// (An earlier test on the same address may have left a closed one on
	// its own queue.)
	var nf *serviceerror.NotFound
	desc, err := e.client.DescribeWorkflowExecution(ctx, workflows.HostWorkflowID(proc.HostID{IP: h.IP}), "")
	if !errors.As(err, &nf) && (err != nil || desc.WorkflowExecutionInfo.GetTaskQueue() == e.cfg.TaskQueue) {
		t.Fatalf("the host workflow started after refused calls only: %v %v", err, desc)
	}

	// Its own namespaces work, at both paths.
	if status, out := post("/api/c/compapi/v2/gse/register_proc_info/", `{`+web+meta("web")+`,`+hosts+`,`+spec+`}`); status != http.StatusOK || !out.Result {
		t.Fatalf("register in web: %d %+v", status, out)
	}
	status, out := post("/api/v2/proc/operate_process", `{`+web+meta("web")+`,"op_type":2,`+hosts+`}`)
	if status != http.StatusOK || !out.Result {
		t.Fatalf("status in web: %d %+v", status, out)
	}
	webTask := out.Data.(map[string]any)["task_id"].(string)
	if _, err := engine.WaitOperate(ctx, e.client, webTask); err != nil {
		t.Fatal(err)
	}
	if status, out := post("/api/v2/proc/get_proc_operate_result", `{`+web+`"task_id":"`+webTask+`"}`); status != http.StatusOK || !out.Result {
		t.Fatalf("result in web: %d %+v", status, out)
	}
	// An app without a list may touch any namespace; its task in "db" is
	// not web-team's to read.
	if status, out := post("/api/v2/proc/operate_process", `{`+ops+meta("db")+`,"op_type":2,`+hosts+`}`); status != http.StatusOK || !out.Result {
		t.Fatalf("ops in db: %d %+v", status, out)
	} else {
		dbTask := out.Data.(map[string]any)["task_id"].(string)
		if _, err := engine.WaitOperate(ctx, e.client, dbTask); err != nil {
			t.Fatal(err)
		}
		status, out := post("/api/v2/proc/get_proc_operate_result", `{`+web+`"task_id":"`+dbTask+`"}`)
		if status != http.StatusForbidden || out.Code != 1000004 || !strings.Contains(out.Message, `field task_id: namespace "db"`) {
			t.Fatalf("web-team read db's task: %d %+v", status, out)
		}
	}
	// Once the list shows the accepted tasks, it would show refused ones
	// too: exactly register, web's status, ops' status and the host.
	var ids []string
	waitFor(t, 20*time.Second, "the accepted tasks in the list", func() bool {
		ids = workflowIDs(t, e.client, onQueues(e.cfg.TaskQueue))
		return len(ids) >= 4
	})
	if len(ids) != 4 {
		t.Fatalf("workflows on the queue: %v, want 4", ids)
	}
}

// gseapiResponse is the documented envelope, with data left raw.
type gseapiResponse struct {
	Result  bool   `json:"result"`
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}
