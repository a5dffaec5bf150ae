package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/internal/testbed"
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

	ids := workflowIDs(t, e.client, fmt.Sprintf("TaskQueue = '%s'", e.cfg.TaskQueue))
	if len(ids) < 4 { // three tasks and the host workflow
		t.Fatalf("workflows on the queue: %v", ids)
	}
	// A client without the key cannot read a task's result.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range ids {
		if strings.HasPrefix(id, "GSETASK:") {
			if _, err := workflows.FetchOperate(ctx, e.client, id); err == nil {
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
