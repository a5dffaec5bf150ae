package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
)

// TestContentStoreOnS3: the starter, `starter serve` and a worker, three
// processes as on three machines, share one bucket of a real S3-compatible
// server (rclone serve s3), with credentials from the AWS environment: a
// push from the CLI and one over HTTP reach the hosts, a repair restores a
// drifted file from the bucket, and hosts' identical long log tails are
// read from it. It needs bin/rclone (minutes to build), so it runs with
// `make test-s3`.
func TestContentStoreOnS3(t *testing.T) {
	if os.Getenv("DROVER_S3_TEST") == "" {
		t.Skip("runs with make test-s3 (DROVER_S3_TEST=1 and bin/rclone)")
	}
	s3 := testbed.NewS3(t, "drover")
	t.Setenv("AWS_ACCESS_KEY_ID", s3.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3.SecretKey)
	bucket, objects := s3.URL("drover"), filepath.Join(s3.Root, "drover")

	e := newEnv(t, 2)
	lines := logLines(300)
	old := "port = 1\n"
	var targets []proc.Target
	for _, h := range e.bed.Hosts {
		installLog(t, h, lines)
		if _, err := h.Exec(fmt.Sprintf("printf '%s' > %s && chown %s %s", old, appConf, testbed.AppUser, appConf)); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, proc.Target{IP: h.IP})
	}
	e.startWorkerBinary(t, buildBinary(t, "worker"), "--content-store", bucket)
	spec := appSpec("app")
	spec.Account, spec.LogPath = testbed.AppUser, "/data/app/log/svc.log"
	spec.ConfigMap = []proc.ConfigFile{{Path: appConf, MD5: md5hex(old)}}
	e.register("web", "svc", spec, targets...)
	base := []string{"--temporal-address", e.cfg.TemporalAddress, "--task-queue", e.cfg.TaskQueue, "--inventory", e.cfg.Inventory}
	gw := startGateway(t, append(base, "--content-store", bucket))
	wantFile := func(h *testbed.Host, content string) {
		t.Helper()
		if got, _ := h.Exec("md5sum < " + appConf + " | cut -c1-32"); strings.TrimSpace(got) != md5hex(content) {
			t.Fatalf("host %s: %s has md5 %q, want %s", h.IP, appConf, got, md5hex(content))
		}
	}

	// From the CLI: the content goes to the bucket, the worker reads it there.
	fromCLI := "port = 2 # pushed through S3 from the CLI\n"
	out, errOut, code := e.starter("", "config", "push", "--namespace", "web", "--name", "svc", "--hosts", "all",
		"--file", pushLocal(t, fromCLI)+":"+appConf+":0640", "--content-store", bucket, "--wait", "-o", "json")
	if code != 0 {
		t.Fatalf("push from the CLI: exit %d\n%s%s", code, out, errOut)
	}
	for _, h := range e.bed.Hosts {
		wantFile(h, fromCLI)
	}
	if stored, _ := filepath.Glob(filepath.Join(objects, "sha256", "*", "*")); len(stored) != 1 {
		t.Fatalf("want the pushed content in the bucket, got %v", stored)
	}

	// Over HTTP, inline: the server stores it in the same bucket.
	fromHTTP := "port = 3 # pushed through S3 over HTTP\n"
	status, resp := gw.post(t, "push_config", `{"meta":{"namespace":"web","name":"svc"},"hosts":[`+
		`{"ip":"`+e.bed.Hosts[0].IP+`","bk_cloud_id":0},{"ip":"`+e.bed.Hosts[1].IP+`","bk_cloud_id":0}],`+
		`"files":[{"path":"`+appConf+`","mode":"0640","content":"`+base64.StdEncoding.EncodeToString([]byte(fromHTTP))+`"}]}`)
	data, _ := resp.Data.(map[string]any)
	id, _ := data["task_id"].(string)
	if status != 200 || !resp.Result || !taskIDPattern.MatchString(id) {
		t.Fatalf("push_config over HTTP: %d %+v", status, resp)
	}
	waitFor(t, time.Minute, "the HTTP push", func() bool {
		out, _, _ := e.starter("", "result", id)
		r := decodeResult(t, out)
		return r.Data[webKey(e.bed.Hosts[0].IP)].ErrorCode == 0 && r.Data[webKey(e.bed.Hosts[1].IP)].ErrorCode == 0
	})
	for _, h := range e.bed.Hosts {
		wantFile(h, fromHTTP)
	}

	// A drifted file is restored from the bucket.
	drifted := e.bed.Hosts[1]
	if _, err := drifted.Exec("echo 'port = 9 # edited by hand' > " + appConf); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = e.starter("", "config", "repair", "--namespace", "web", "--name", "svc", "--hosts", drifted.IP,
		"--content-store", bucket, "--wait", "-o", "json")
	if r := decodeRows(t, out)[webKey(drifted.IP)]; code != 0 || !strings.Contains(r.Message, "restored "+appConf) {
		t.Fatalf("repair: exit %d %+v\n%s", code, r, errOut)
	}
	wantFile(drifted, fromHTTP)

	// Long tails, the same on both hosts, through the bucket.
	for range 2 {
		out, errOut, code = e.starter("", "logs", "--namespace", "web", "--name", "svc", "--hosts", "all", "--tail", "250",
			"--content-store", bucket)
		if code != 0 {
			t.Fatalf("logs: exit %d\n%s%s", code, out, errOut)
		}
		wantTails(t, e, out, lines[50:])
	}
	if tails, _ := filepath.Glob(filepath.Join(objects, "tails", "sha256", "*", "*")); len(tails) != 1 {
		t.Fatalf("want one shared tail in the bucket, got %v", tails)
	}
}
