package e2e

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

const appConf = "/data/app/app.conf"

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// filesEnv is n hosts with the app installed under /data/app, owned by
// drover-app, with a root-owned app.conf holding old; the process runs as
// drover-app with app.conf in its configmap, and the worker and starter
// share a content store.
func filesEnv(t *testing.T, n int, old string) (*env, proc.Spec, []proc.Target) {
	t.Helper()
	e := newEnv(t, n)
	e.cfg.FilesDir = t.TempDir()
	var targets []proc.Target
	for _, h := range e.bed.Hosts {
		installApp(t, h, "app")
		if _, err := h.Exec("chown -R " + testbed.AppUser + " /data/app && printf '%s' '" + old + "' > " + appConf + " && chmod 600 " + appConf); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, proc.Target{IP: h.IP})
	}
	e.startWorker()
	spec := appSpec("app")
	spec.Account = testbed.AppUser
	spec.ConfigMap = []proc.ConfigFile{{Path: appConf, MD5: md5hex(old)}}
	e.register("web", "svc", spec, targets...)
	return e, spec, targets
}

// fileRow is one host's line of the starter's -o json recap.
type fileRow struct {
	Key     string `json:"key"`
	Code    int    `json:"error_code"`
	Message string `json:"error_msg"`
}

func decodeRows(t *testing.T, out string) map[string]fileRow {
	t.Helper()
	var rows []fileRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("recap is not JSON: %v\n%s", err, out)
	}
	m := map[string]fileRow{}
	for _, r := range rows {
		m[r.Key] = r
	}
	return m
}

func webKey(ip string) string { return "0:0:" + ip + ":web:svc" }

var taskIDPattern = regexp.MustCompile(`GSETASK:\d{14}:\d+`)

// pushLocal writes content to a local file for --file.
func pushLocal(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "app.conf")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigPushThenReload(t *testing.T) {
	e, spec, _ := filesEnv(t, 5, "port = 1\n")
	pids := map[string]int{}
	if out, errOut, code := e.starter("", "start", "--namespace", "web", "--name", "svc", "--hosts", "all", "--wait"); code != 0 {
		t.Fatalf("start: exit %d\n%s%s", code, out, errOut)
	}
	for _, h := range e.bed.Hosts {
		pids[h.IP] = hostPid(t, h, spec.PidPath)
	}
	// A progress marker on two hosts: supervision polled after the push.
	clocks := []pollClock{e.pollClock(t, e.bed.Hosts[0].IP, e.bed.Hosts[0], "clock"), e.pollClock(t, e.bed.Hosts[1].IP, e.bed.Hosts[1], "clock")}

	content := "port = 2\nworkers = 4 # pushed-by-the-files-test\n"
	want := md5hex(content)
	out, errOut, code := e.starter("", "config", "push", "--namespace", "web", "--name", "svc", "--hosts", "all",
		"--file", pushLocal(t, content)+":"+appConf+":0640", "--then", "reload", "--wait", "-o", "json", "--files-dir", e.cfg.FilesDir)
	if code != 0 {
		t.Fatalf("push: exit %d\n%s%s", code, out, errOut)
	}
	rows := decodeRows(t, out)
	for _, h := range e.bed.Hosts {
		r := rows[webKey(h.IP)]
		if r.Code != 0 || !strings.Contains(r.Message, "pushed "+appConf) || !strings.Contains(r.Message, "then reload: success") {
			t.Fatalf("host %s: %+v", h.IP, r)
		}
		got, _ := h.Exec("stat -c '%U %a' " + appConf + "; md5sum < " + appConf + " | cut -c1-32; ls -a /data/app | grep -c drover- || true; cat /data/app/events 2>/dev/null")
		lines := strings.Split(strings.TrimSpace(got), "\n")
		if len(lines) < 4 || lines[0] != testbed.AppUser+" 640" || lines[1] != want || lines[2] != "0" || !strings.Contains(lines[3], "reload") {
			t.Fatalf("host %s after the push: owner and mode, md5, temporary files, reloads:\n%s", h.IP, got)
		}
		if p := hostPid(t, h, spec.PidPath); p != pids[h.IP] || !hostAlive(h, p) {
			t.Fatalf("host %s: reload must keep pid %d alive, pid file says %d", h.IP, pids[h.IP], p)
		}
		en := e.entry(t, h.IP, proc.ProcessID{Namespace: "web", Name: "svc"})
		if len(en.Spec.ConfigMap) != 1 || en.Spec.ConfigMap[0].MD5 != want || en.Spec.ConfigMap[0].Source == nil {
			t.Fatalf("host %s: the registry's configmap must hold the pushed md5 and source: %+v", h.IP, en.Spec.ConfigMap)
		}
	}
	// Drift is checked against what was pushed: none, over polls that
	// began after the push.
	awaitPolls(t, clocks)
	for _, h := range e.bed.Hosts {
		if n := countKind(e.events(t, h), workflows.EventConfigDrift); n != 0 {
			t.Fatalf("host %s reported drift after the push: %+v", h.IP, e.events(t, h))
		}
	}
	// The content is in no history, plain or base64: only its digest.
	task := taskIDPattern.FindString(errOut)
	if task == "" {
		t.Fatalf("no task id in the progress line: %q", errOut)
	}
	for _, id := range []string{task, workflows.HostWorkflowID(proc.HostID{IP: e.bed.Hosts[0].IP})} {
		dump := workflowDump(t, e.cfg.TemporalAddress, id)
		for _, secret := range []string{"pushed-by-the-files-test", base64.StdEncoding.EncodeToString([]byte(content))} {
			if n := countLeaks(dump, secret); n != 0 {
				t.Fatalf("history of %s holds the file's content %d times", id, n)
			}
		}
		// The search sees what is there: the digest is.
		if countLeaks(dump, want) == 0 {
			t.Fatalf("history of %s does not show the content's md5 %s: the search proves nothing", id, want)
		}
	}
}
