package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

func TestStarterLogs(t *testing.T) {
	e := newEnv(t, 3)
	e.cfg.FilesDir = t.TempDir()
	var targets []proc.Target
	for i, h := range e.bed.Hosts {
		installApp(t, h, "app")
		script := fmt.Sprintf("mkdir -p /data/app/log && for n in 1 2 3 4 5; do echo \"host %d line $n\"; done > /data/app/log/old.log && "+
			"touch -d '2020-01-01' /data/app/log/old.log && (echo 'host %d newest a'; echo 'ERROR host %d newest b'; echo 'host %d newest c') > /data/app/log/svc.log && "+
			"chown -R %s /data/app", i, i, i, i, testbed.AppUser)
		if _, err := h.Exec(script); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, proc.Target{IP: h.IP})
	}
	// Host 2's newest entry is a symlink out of the directory: not followed.
	if _, err := e.bed.Hosts[2].Exec("echo 'secret outside' > /data/secret && ln -s /data/secret /data/app/log/zzz.log && touch -h /data/app/log/zzz.log"); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	spec := appSpec("app")
	spec.Account = testbed.AppUser
	spec.LogPath = "/data/app/log/"
	e.register("web", "svc", spec, targets[:2]...)
	file := spec
	file.LogPath = "/data/app/log/old.log"
	e.register("web", "svc", file, targets[2])

	out, errOut, code := e.starter("", "logs", "--namespace", "web", "--name", "svc", "--hosts", "all", "--tail", "2", "--files-dir", e.cfg.FilesDir, "--wait")
	if code != 0 {
		t.Fatalf("logs: exit %d\n%s%s", code, out, errOut)
	}
	for i, h := range e.bed.Hosts[:2] {
		want := fmt.Sprintf("==> %s: /data/app/log/svc.log <==\nERROR host %d newest b\nhost %d newest c\n", webKey(h.IP), i, i)
		if !strings.Contains(out, want) {
			t.Fatalf("logs of host %s: want\n%s\nin\n%s", h.IP, want, out)
		}
	}
	if want := fmt.Sprintf("==> %s: /data/app/log/old.log <==\nhost 2 line 4\nhost 2 line 5\n", webKey(e.bed.Hosts[2].IP)); !strings.Contains(out, want) ||
		strings.Contains(out, "secret outside") || !strings.Contains(out, "3 hosts: 3 success (0)") {
		t.Fatalf("logs: want\n%s\nand no secret in\n%s", want, out)
	}
	// --grep keeps matching lines only; short tails come back in their
	// results, and the content store holds none.
	out, _, code = e.starter("", "logs", "--namespace", "web", "--name", "svc", "--hosts", e.bed.Hosts[0].IP, "--grep", "^ERROR", "--files-dir", e.cfg.FilesDir, "--wait", "-o", "json")
	if code != 0 || !strings.Contains(out, `"ERROR host 0 newest b"`) || strings.Contains(out, "newest c") {
		t.Fatalf("logs --grep: exit %d\n%s", code, out)
	}
	if left, _ := filepath.Glob(filepath.Join(e.cfg.FilesDir, "*")); len(left) != 0 {
		t.Fatalf("short log tails went through the content store: %v", left)
	}
	// A log_path that is a symlink out of its directory is refused on its host.
	out, _, code = e.starter("", "logs", "--namespace", "web", "--name", "svc", "--hosts", e.bed.Hosts[2].IP, "--files-dir", e.cfg.FilesDir, "--wait")
	if code != 0 {
		t.Fatalf("logs of a plain file: exit %d\n%s", code, out)
	}
	link := spec
	link.LogPath, link.ValueKey = "/data/app/log/zzz.log", "link"
	e.register("web", "link", link, targets[2])
	out, _, code = e.starter("", "logs", "--namespace", "web", "--name", "link", "--hosts", e.bed.Hosts[2].IP, "--files-dir", e.cfg.FilesDir, "--wait")
	if code != 1 || !strings.Contains(out, "9107") || !strings.Contains(out, "outside /data/app/log") || strings.Contains(out, "secret outside") {
		t.Fatalf("logs through a symlink out of the directory: exit %d\n%s", code, out)
	}
	// Bad input is refused before anything starts.
	_, errOut, code = e.starter("", "logs", "--namespace", "web", "--name", "svc", "--grep", "(", "--files-dir", e.cfg.FilesDir)
	if code != 2 || !strings.Contains(errOut, "field grep") {
		t.Fatalf("bad --grep: exit %d %s", code, errOut)
	}
}

func TestFailedStartCarriesTheLogTail(t *testing.T) {
	e := newEnv(t, 1)
	e.cfg.FilesDir = t.TempDir()
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	// A service that logs a failure to bind and exits; before it, a
	// hundred long lines the bound must leave out.
	if _, err := h.Exec(`mkdir -p /data/bad/log && cp /data/app/svc /data/bad/svc && cat > /data/bad/start.sh <<'EOS'
#!/bin/sh
i=0; while [ $i -lt 100 ]; do echo "noise $i $(printf '%0100d' 0)"; i=$((i+1)); done >> /data/bad/log/svc.log
echo "listen tcp :8080: bind: address already in use" >> /data/bad/log/svc.log
EOS
printf '#!/bin/sh\necho "cannot open config" >&2; exit 3\n' > /data/bad/broken.sh
chmod +x /data/bad/*.sh`); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	spec := proc.Spec{ProcName: "svc", SetupPath: "/data/bad", PidPath: "/data/bad/svc.pid", StartCmd: "./start.sh",
		LogPath: "/data/bad/log/", AutoType: proc.AutoResident, StartCheck: time.Second, OpTimeout: 20 * time.Second}
	e.register("web", "bad", spec, proc.Target{IP: h.IP})
	out, errOut, code := e.starter("", "start", "--namespace", "web", "--name", "bad", "--hosts", "all", "--wait", "-o", "json")
	r := decodeRows(t, out)["0:0:"+h.IP+":web:bad"]
	if code != 1 || r.Code != int(proc.CodePostCheck) || !strings.Contains(r.Message, "log /data/bad/log/svc.log: ") ||
		!strings.HasSuffix(r.Message, "bind: address already in use") || len(r.Message) > 2600 || strings.Contains(r.Message, "\n") {
		t.Fatalf("a start failing its post-check must end 836 with the log's last lines (bounded, one line): exit %d %+v %s", code, r, errOut)
	}
	// A start command that fails (65535) gets the tail too.
	spec.StartCmd = "./broken.sh"
	e.register("web", "broken", withValueKey(spec, "broken"), proc.Target{IP: h.IP})
	out, _, _ = e.starter("", "start", "--namespace", "web", "--name", "broken", "--hosts", "all", "--wait", "-o", "json")
	if r := decodeRows(t, out)["0:0:"+h.IP+":web:broken"]; r.Code != int(proc.CodeCommandFailed) ||
		!strings.Contains(r.Message, "cannot open config") || !strings.Contains(r.Message, "bind: address already in use") {
		t.Fatalf("a failing start command must end 65535 with its output and the log's tail: %+v", r)
	}

	// Supervision's restart that fails records the tail in its event.
	_, pid := e.supervised(t, h, func(s *proc.Spec) { s.LogPath = "/data/app/svc.log" })
	if _, err := h.Exec(`printf '#!/bin/sh\necho "open /data/app/app.conf: permission denied" >> /data/app/svc.log\n' > /data/app/start.sh && kill -9 ` + strconv.Itoa(pid)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a failed restart", e.hasEvent(t, h, workflows.EventRestartFailed))
	for _, ev := range e.events(t, h) {
		if ev.Kind == workflows.EventRestartFailed && !strings.Contains(ev.Detail, "log /data/app/svc.log: open /data/app/app.conf: permission denied") {
			t.Fatalf("the failed restart's event lacks the log's tail: %+v", ev)
		}
	}
}

func withValueKey(s proc.Spec, key string) proc.Spec {
	s.ValueKey = key
	return s
}
