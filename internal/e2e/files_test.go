package e2e

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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

// pushResult is a starter run's outcome, handed back from its goroutine.
type pushResult struct {
	out, errOut string
	code        int
}

func TestConfigPushDroppedMidTransferLeavesNoTornFile(t *testing.T) {
	old := "port = 1\n"
	e, _, _ := filesEnv(t, 3, old)
	h := e.bed.Hosts[0]
	const size = 60 << 20
	local := filepath.Join(t.TempDir(), "big.conf")
	for attempt := 1; ; attempt++ {
		content := make([]byte, size)
		if _, err := rand.Read(content); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(local, content, 0o600); err != nil {
			t.Fatal(err)
		}
		sum := md5.Sum(content)
		want := hex.EncodeToString(sum[:])
		done := make(chan pushResult, 1)
		go func() {
			out, errOut, code := e.starter("", "config", "push", "--namespace", "web", "--name", "svc", "--hosts", "all",
				"--file", local+":"+appConf, "--wait", "-o", "json", "--files-dir", e.cfg.FilesDir)
			done <- pushResult{out, errOut, code}
		}()
		// Freeze host 0 once its temporary file holds part of the content,
		// then kill its sessions: the connection dies mid-transfer.
		caught, finished := false, false
		var res pushResult
		for !caught && !finished {
			select {
			case res = <-done:
				finished = true
				continue
			default:
			}
			out, _ := h.Exec("stat -c %s /data/app/.app.conf.drover-*" + " 2>/dev/null | head -1")
			n, _ := strconv.Atoi(strings.TrimSpace(out))
			if n <= 0 || n >= size {
				continue
			}
			if err := h.Pause(); err != nil {
				t.Fatal(err)
			}
			out, _ = h.Exec("stat -c %s /data/app/.app.conf.drover-* 2>/dev/null | head -1")
			if n, _ = strconv.Atoi(strings.TrimSpace(out)); n > 0 && n < size {
				if _, err := h.DropSessions(); err != nil {
					t.Fatal(err)
				}
				caught = true
				t.Logf("attempt %d: connection dropped with %d of %d bytes in the temporary file", attempt, n, size)
			}
			if err := h.Resume(); err != nil {
				t.Fatal(err)
			}
		}
		if !finished {
			res = <-done
		}
		if !caught {
			// The transfer ended before it was seen half-way: again, with
			// new content.
			if attempt == 3 {
				t.Fatalf("the transfer to %s was never caught half-way in %d attempts", h.IP, attempt)
			}
			continue
		}
		rows := decodeRows(t, res.out)
		if r := rows[webKey(h.IP)]; r.Code == 0 || r.Code == int(proc.CodeRunning) {
			t.Fatalf("host %s, its connection dropped mid-transfer, answered %+v", h.IP, r)
		}
		for _, o := range e.bed.Hosts[1:] {
			if r := rows[webKey(o.IP)]; r.Code != 0 {
				t.Fatalf("host %s must not suffer from another's dropped connection: %+v", o.IP, r)
			}
			if got, _ := o.Exec("md5sum < " + appConf + " | cut -c1-32"); strings.TrimSpace(got) != want {
				t.Fatalf("host %s: md5 %s, want the pushed %s", o.IP, got, want)
			}
		}
		got, _ := h.Exec("md5sum < " + appConf + " | cut -c1-32; ls -a /data/app | grep -c drover- || true")
		if lines := strings.Fields(got); len(lines) != 2 || lines[0] != md5hex(old) || lines[1] != "0" {
			t.Fatalf("host %s after the dropped transfer: md5 of app.conf (want the old %s) and temporary files left:\n%s", h.IP, md5hex(old), got)
		}
		if cm := e.entry(t, h.IP, proc.ProcessID{Namespace: "web", Name: "svc"}).Spec.ConfigMap; cm[0].MD5 != md5hex(old) {
			t.Fatalf("host %s: the registry must keep the old md5 after a failed push: %+v", h.IP, cm)
		}
		chaosCount(t, "faults", 1)
		return
	}
}

func TestConfigPushRefusesBadPaths(t *testing.T) {
	e, _, _ := filesEnv(t, 1, "port = 1\n")
	h := e.bed.Hosts[0]
	// A symlink in the directory, pointing out of it.
	if _, err := h.Exec("mkdir -p /data/outside && echo keep > /data/outside/target && ln -s /data/outside/target /data/app/linked.conf"); err != nil {
		t.Fatal(err)
	}
	local := pushLocal(t, "evil = 1\n")
	before, _ := h.Exec("find /data -type f -newer " + appConf + " | sort; ls -la /data/app /data/outside")
	for _, c := range []struct{ remote, field string }{
		{"data/app/app.conf", "absolute REMOTE path"},
		{"/data/app/../outside/target", "must not contain a '..' component"},
	} {
		out, errOut, code := e.starter("", "config", "push", "--namespace", "web", "--name", "svc", "--hosts", "all",
			"--file", local+":"+c.remote, "--wait", "--files-dir", e.cfg.FilesDir)
		if code != 2 || !strings.Contains(errOut, "--file[0]") || !strings.Contains(errOut, c.field) {
			t.Fatalf("push to %s: exit %d, want 2 naming --file[0] and %q:\n%s%s", c.remote, code, c.field, out, errOut)
		}
	}
	out, errOut, code := e.starter("", "config", "push", "--namespace", "web", "--name", "svc", "--hosts", "all",
		"--file", local+":/data/app/linked.conf", "--wait", "-o", "json", "--files-dir", e.cfg.FilesDir)
	r := decodeRows(t, out)[webKey(h.IP)]
	if code != 1 || r.Code != int(proc.CodeBadSpec) || !strings.Contains(r.Message, "field files[0].path") ||
		!strings.Contains(r.Message, "symlink to /data/outside/target, outside /data/app") {
		t.Fatalf("push through a symlink: exit %d %+v %s", code, r, errOut)
	}
	after, _ := h.Exec("find /data -type f -newer " + appConf + " | sort; ls -la /data/app /data/outside")
	if after != before {
		t.Fatalf("a refused push wrote on the host:\nbefore %s\nafter %s", before, after)
	}
	if got, _ := h.Exec("cat /data/outside/target"); got != "keep\n" {
		t.Fatalf("the symlink's target changed: %q", got)
	}
	// The same refusal over HTTP, with the content inline.
	body := `{"bk_app_code":"e2e","meta":{"namespace":"web","name":"svc"},"hosts":[{"ip":"` + h.IP + `","bk_cloud_id":0}],` +
		`"files":[{"path":"/data/app/../outside/target","content":"ZXZpbCA9IDEK"}]}`
	out, errOut, code = e.starter(body, "api", "push_config", "--files-dir", e.cfg.FilesDir)
	if code != 2 || !strings.Contains(out+errOut, "field files[0].path") {
		t.Fatalf("push_config with '..': exit %d\n%s%s", code, out, errOut)
	}
}

func TestConfigDriftRepair(t *testing.T) {
	// Beside the suite's other parallel tests: it mostly waits on supervision's polls.
	t.Parallel()
	e, _, _ := filesEnv(t, 2, "port = 1\n")
	h, other := e.bed.Hosts[0], e.bed.Hosts[1]
	if out, errOut, code := e.starter("", "start", "--namespace", "web", "--name", "svc", "--hosts", "all", "--wait"); code != 0 {
		t.Fatalf("start: exit %d\n%s%s", code, out, errOut)
	}
	content := "port = 3\n"
	want := md5hex(content)
	if out, errOut, code := e.starter("", "config", "push", "--namespace", "web", "--name", "svc", "--hosts", "all",
		"--file", pushLocal(t, content)+":"+appConf, "--wait", "--files-dir", e.cfg.FilesDir); code != 0 {
		t.Fatalf("push: exit %d\n%s%s", code, out, errOut)
	}
	// No drift so far (the root-owned file the account could not read
	// before the push is not drift), so the event awaited below is the
	// hand change's.
	if n := countKind(e.events(t, h), workflows.EventConfigDrift); n != 0 {
		t.Fatalf("drift reported before the file changed: %+v", e.events(t, h))
	}
	// Changed by hand: supervision reports the drift.
	if _, err := h.Exec("echo 'port = 9' > " + appConf); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "drift event", e.hasEvent(t, h, workflows.EventConfigDrift))
	p := proc.ProcessID{Namespace: "web", Name: "svc"}
	st := e.op(proc.OpStatus, proc.Item{Target: proc.Target{IP: h.IP}, Process: p})
	if !strings.Contains(st.Content, `"configDrift":["`+appConf+`"]`) {
		t.Fatalf("status must report the drifted file: %s", st.Content)
	}
	out, repairErr, code := e.starter("", "config", "repair", "--namespace", "web", "--name", "svc", "--hosts", "all", "--wait", "-o", "json")
	if code != 0 {
		t.Fatalf("repair: exit %d\n%s%s", code, out, repairErr)
	}
	rows := decodeRows(t, out)
	if r := rows[webKey(h.IP)]; r.Code != 0 || !strings.Contains(r.Message, "restored "+appConf) {
		t.Fatalf("repair of the drifted host: %+v", r)
	}
	if r := rows[webKey(other.IP)]; r.Code != 0 || r.Message != "no config drift" {
		t.Fatalf("repair of the host without drift: %+v", r)
	}
	got, _ := h.Exec("stat -c '%U %a' " + appConf + "; md5sum < " + appConf + " | cut -c1-32; ls -a /data/app | grep -c drover- || true")
	if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 3 || lines[0] != testbed.AppUser+" 644" || lines[1] != want || lines[2] != "0" {
		t.Fatalf("after the repair: owner and mode, md5 (want %s), temporary files:\n%s", want, got)
	}
	// The drift clears: at once in status and the events, and supervision,
	// polling on, reports none again.
	if en := e.entry(t, h.IP, p); len(en.Drifted) != 0 {
		t.Fatalf("drift after the repair: %v", en.Drifted)
	}
	if !e.hasEvent(t, h, workflows.EventConfigRestored)() {
		t.Fatalf("no %s event: %+v", workflows.EventConfigRestored, e.events(t, h))
	}
	clock := e.pollClock(t, h.IP, h, "clock")
	clock.await(t)
	if n := countKind(e.events(t, h), workflows.EventConfigDrift); n != 1 {
		t.Fatalf("drift reported %d times, want the one before the repair: %+v", n, e.events(t, h))
	}
	st = e.op(proc.OpStatus, proc.Item{Target: proc.Target{IP: h.IP}, Process: p})
	if strings.Contains(st.Content, "configDrift") {
		t.Fatalf("status after the repair: %s", st.Content)
	}
	// A push, a drift and a repair, for the replay tests.
	e.recordHistory(workflows.HostWorkflowID(proc.HostID{IP: h.IP}), "host-config-files")
	e.recordHistory(taskIDPattern.FindString(repairErr), "operate-config-repair")
}

func TestPushConfigAPIWithInlineContentRefusesWindows(t *testing.T) {
	e, wins := newWinEnv(t, 1, nil, testbed.WinOptions{})
	e.cfg.FilesDir = t.TempDir()
	h, w := e.bed.Hosts[0], wins[0]
	installApp(t, h, "app")
	installWinApp(w, `C:\apps\app`, "bat")
	e.startWorker()
	e.register("web", "svc", appSpec("app"), proc.Target{IP: h.IP})
	e.register("web", "svc", winSpec(`C:\apps\app`, proc.ShellBat), proc.Target{IP: w.IP})
	content := "port = 5\n"
	body := `{"bk_app_code":"e2e","bk_username":"tester","meta":{"namespace":"web","name":"svc"},` +
		`"hosts":[{"ip":"` + h.IP + `","bk_cloud_id":0},{"ip":"` + w.IP + `","bk_cloud_id":0}],` +
		`"files":[{"path":"` + appConf + `","mode":"0600","content":"` + base64.StdEncoding.EncodeToString([]byte(content)) + `"}]}`
	out, errOut, _ := e.starter(body, "api", "push_config", "-f", "-", "--wait", "--files-dir", e.cfg.FilesDir)
	r := decodeResult(t, out)
	if !r.Result || len(r.Data) != 2 {
		t.Fatalf("push_config: %s%s", out, errOut)
	}
	if got := r.Data[key(h.IP, "web", "svc")]; got.ErrorCode != 0 || !strings.Contains(got.ErrorMsg, "pushed "+appConf) {
		t.Fatalf("ssh host: %+v", got)
	}
	if got := r.Data[key(w.IP, "web", "svc")]; got.ErrorCode != int(proc.CodeBadSpec) || !strings.Contains(got.ErrorMsg, "WinRM host") {
		t.Fatalf("WinRM host: %+v, want 9107", got)
	}
	if got, _ := h.Exec("stat -c %a " + appConf + "; md5sum < " + appConf + " | cut -c1-32"); strings.Fields(got)[0] != "600" || strings.Fields(got)[1] != md5hex(content) {
		t.Fatalf("ssh host's file: %s", got)
	}
}
