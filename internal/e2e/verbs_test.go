package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-sh/drover/internal/cli"
)

func TestStarterVerbs(t *testing.T) {
	e := newEnv(t, 3)
	for _, h := range e.bed.Hosts {
		installApp(t, h, "app")
	}
	e.startWorker()
	web0, db, web2 := e.bed.Hosts[0].IP, e.bed.Hosts[1].IP, e.bed.Hosts[2].IP

	out, _, code := e.starter("", "hosts", "--hosts", "group:web")
	if code != 0 || !strings.Contains(out, web0) || !strings.Contains(out, web2) || strings.Contains(out, db+" ") ||
		!strings.Contains(out, "2 of 3 hosts selected") {
		t.Fatalf("hosts: exit %d\n%s", code, out)
	}
	out, _, code = e.starter("", "hosts", "--hosts", "group:nope")
	if code != cli.ExitBadRequest {
		t.Fatalf("an empty selection must be refused: exit %d %s", code, out)
	}

	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte(`identity: {proc_name: svc, setup_path: /data/app, pid_path: /data/app/svc.pid, user: root}
control: {start_cmd: ./start.sh, stop_cmd: ./stop.sh}
resource: {cpu: 50, mem: 50}
monitor_policy: {auto_type: 1, start_check_secs: 1}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := e.starter("", "register", "--namespace", "web", "--name", "svc", "--hosts", "group:web", "--spec", spec, "-o", "json")
	if code != 0 || strings.Count(out, `"error_code": 0`) != 2 {
		t.Fatalf("register: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code = e.starter("", "start", "--namespace", "web", "--name", "svc", "--hosts", "group:web", "--wait"); code != 0 {
		t.Fatalf("start: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = e.starter("", "restart", "--namespace", "web", "--name", "svc", "--hosts", "group:web", "--wait")
	if code != 0 {
		t.Fatalf("restart: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "2/2 done, 0 failed") || !strings.Contains(errOut, "[====") {
		t.Fatalf("no progress on stderr: %q", errOut)
	}
	for _, want := range []string{"HOST", "CODE", "MESSAGE", "0:0:" + web0 + ":web:svc", "0:0:" + web2 + ":web:svc", "2 hosts: 2 success (0)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("recap lacks %q:\n%s", want, out)
		}
	}
	// A host that fails shows in the recap and the exit code.
	out, _, code = e.starter("", "status", "--namespace", "web", "--name", "svc", "--hosts", "all", "--wait")
	if code != cli.ExitHostsFailed || !strings.Contains(out, "1 process not registered on this host (9106)") {
		t.Fatalf("status over all: exit %d\n%s", code, out)
	}
	// Bad input names the field and starts nothing.
	out, errOut, code = e.starter("", "stop", "--namespace", "web", "--hosts", "group:web", "--wait")
	if code != cli.ExitBadRequest || !strings.Contains(out+errOut, "meta.name") {
		t.Fatalf("missing --name: exit %d %s%s", code, out, errOut)
	}
}
