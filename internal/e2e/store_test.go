package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-sh/drover/internal/filestore"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
)

// logLines is n log lines of about 60 bytes, the same on every host.
func logLines(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("2026-11-25T10:00:%02d INFO request %04d served in 3ms %s", i%60, i, strings.Repeat("x", 10))
	}
	return out
}

// logsEnv is n hosts running nothing, each with web/svc registered as
// drover-app with log_path /data/app/log/svc.log holding lines, and a
// worker whose content store is filesDir (the default when empty).
func logsEnv(t *testing.T, n int, lines []string, filesDir string) *env {
	t.Helper()
	e := newEnv(t, n)
	e.cfg.FilesDir = filesDir
	var targets []proc.Target
	for _, h := range e.bed.Hosts {
		installLog(t, h, lines)
		targets = append(targets, proc.Target{IP: h.IP})
	}
	e.startWorker()
	spec := appSpec("app")
	spec.Account, spec.LogPath = testbed.AppUser, "/data/app/log/svc.log"
	e.register("web", "svc", spec, targets...)
	return e
}

// installLog installs the app under /data/app, owned by drover-app, with
// lines in /data/app/log/svc.log.
func installLog(t *testing.T, h *testbed.Host, lines []string) {
	t.Helper()
	installApp(t, h, "app")
	script := "mkdir -p /data/app/log && cat > /data/app/log/svc.log <<'EOL'\n" + strings.Join(lines, "\n") + "\nEOL\nchown -R " + testbed.AppUser + " /data/app"
	if _, err := h.Exec(script); err != nil {
		t.Fatal(err)
	}
}

// wantTails checks that every host printed the same last lines.
func wantTails(t *testing.T, e *env, out string, lines []string) {
	t.Helper()
	for _, h := range e.bed.Hosts {
		want := fmt.Sprintf("==> %s: /data/app/log/svc.log <==\n%s\n", webKey(h.IP), strings.Join(lines, "\n"))
		if !strings.Contains(out, want) {
			t.Fatalf("host %s: want its tail\n%s\nin\n%s", h.IP, want, out)
		}
	}
	if want := fmt.Sprintf("%d hosts: %d success (0)\n", len(e.bed.Hosts), len(e.bed.Hosts)); !strings.HasSuffix(out, want) {
		t.Fatalf("want every host to succeed (%q) in\n%s", want, out)
	}
}

// A new user on one machine pushes a file and reads logs with no file
// setting at all: starter and worker share the per-user default store.
func TestFilesWithNoSetting(t *testing.T) {
	lines := logLines(30)
	e := logsEnv(t, 1, lines, "")
	h := e.bed.Hosts[0]
	content := "port = 7 # pushed with no setting\n"
	out, errOut, code := e.starter("", "config", "push", "--namespace", "web", "--name", "svc", "--hosts", "all",
		"--file", pushLocal(t, content)+":"+appConf+":0600", "--wait", "-o", "json")
	if r := decodeRows(t, out)[webKey(h.IP)]; code != 0 || r.Code != 0 {
		t.Fatalf("push with no content store setting: exit %d %+v\n%s", code, r, errOut)
	}
	if got, _ := h.Exec("md5sum < " + appConf + " | cut -c1-32"); strings.TrimSpace(got) != md5hex(content) {
		t.Fatalf("pushed file's md5 %q, want %s", got, md5hex(content))
	}
	dir, err := filestore.DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the default store %s must exist, its owner's only: %v", dir, err)
	}
	out, errOut, code = e.starter("", "logs", "--namespace", "web", "--name", "svc", "--hosts", "all")
	if code != 0 {
		t.Fatalf("logs with no setting: exit %d\n%s%s", code, out, errOut)
	}
	wantTails(t, e, out, lines[10:])
}

// Hosts whose logs end alike all print their tail: a tail many results
// name is not deleted by the first reader, whether it came back in the
// results (the default) or went through the content store (a long one).
func TestLogsOfHostsWithIdenticalTails(t *testing.T) {
	lines := logLines(300)
	e := logsEnv(t, 2, lines, t.TempDir())
	out, errOut, code := e.starter("", "logs", "--namespace", "web", "--name", "svc", "--hosts", "all", "--files-dir", e.cfg.FilesDir, "--wait")
	if code != 0 {
		t.Fatalf("logs: exit %d\n%s%s", code, out, errOut)
	}
	wantTails(t, e, out, lines[280:])
	// 250 lines are about 15 KB: through the store, once for both hosts.
	for range 2 {
		out, errOut, code = e.starter("", "logs", "--namespace", "web", "--name", "svc", "--hosts", "all", "--tail", "250",
			"--files-dir", e.cfg.FilesDir, "--wait")
		if code != 0 {
			t.Fatalf("logs --tail 250: exit %d\n%s%s", code, out, errOut)
		}
		wantTails(t, e, out, lines[50:])
	}
	if tails, _ := filepath.Glob(filepath.Join(e.cfg.FilesDir, "tails", "sha256", "*", "*")); len(tails) != 1 {
		t.Fatalf("want the one shared tail kept in the content store, got %v", tails)
	}
}

// A host whose tail cannot be read ends 9199 and the exit code says so:
// here the starter reads another content store than the worker wrote.
func TestLogsTailNotReadableFailsTheExitCode(t *testing.T) {
	lines := logLines(300)
	e := logsEnv(t, 1, lines, t.TempDir())
	out, errOut, code := e.starter("", "logs", "--namespace", "web", "--name", "svc", "--hosts", "all", "--tail", "250",
		"--files-dir", t.TempDir(), "--wait")
	if code != 1 || !strings.Contains(out, webKey(e.bed.Hosts[0].IP)+": 9199 read the tail") ||
		!strings.Contains(out, "is not in the content store") || !strings.Contains(out, "content_store") {
		t.Fatalf("a tail the starter cannot read: exit %d, want 1 with 9199 naming the store\n%s%s", code, out, errOut)
	}
}

// Read verbs print their answer wherever their output goes (here, not a
// terminal, as in a cron job); a write verb there prints its task id.
func TestReadVerbsPrintTheirAnswerInScripts(t *testing.T) {
	lines := logLines(5)
	e := logsEnv(t, 1, lines, "")
	h := e.bed.Hosts[0]
	out, errOut, _ := e.starter("", "logs", "--namespace", "web", "--name", "svc", "--hosts", "all")
	if taskIDPattern.MatchString(out) || !strings.Contains(out, lines[4]) {
		t.Fatalf("logs in a script printed\n%s%s", out, errOut)
	}
	if strings.Contains(errOut, "[") {
		t.Fatalf("logs in a script drew a progress bar on stderr: %q", errOut)
	}
	out, errOut, code := e.starter("", "status", "--namespace", "web", "--name", "svc", "--hosts", "all", "-o", "json")
	if r, ok := decodeRows(t, out)[webKey(h.IP)]; !ok || r.Code != int(proc.CodeNotRunning) || code != 1 {
		t.Fatalf("status -o json in a script: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, _ := e.starter("", "ps"); !strings.Contains(out, "web/svc") {
		t.Fatalf("ps in a script:\n%s%s", out, errOut)
	}
	if out, errOut, _ := e.starter("", "hosts", "--hosts", "all"); !strings.Contains(out, h.IP) {
		t.Fatalf("hosts in a script:\n%s%s", out, errOut)
	}
	out, errOut, code = e.starter("", "stop", "--namespace", "web", "--name", "svc", "--hosts", "all")
	if id := strings.TrimSpace(out); code != 0 || !taskIDPattern.MatchString(id) || id != taskIDPattern.FindString(id) {
		t.Fatalf("a write verb in a script prints its task id alone: exit %d %q %s", code, out, errOut)
	}
	// --no-wait keeps a read verb's task id for a script that follows it.
	if out, _, _ := e.starter("", "status", "--namespace", "web", "--name", "svc", "--hosts", "all", "--no-wait"); !taskIDPattern.MatchString(out) {
		t.Fatalf("status --no-wait: %q", out)
	}
}
