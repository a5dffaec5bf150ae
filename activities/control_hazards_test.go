package activities

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/transport"
)

// TestControlWatchdogSparesAGroupThatTookItsPid: on a busy host the pid of
// a command that ended comes round again within seconds. A new session
// given that pid (in a pid namespace of its own, through ns_last_pid) must
// outlive the ended command's op_timeout: the watchdog ends with its
// command, and knows it by pid and start time.
func TestControlWatchdogSparesAGroupThatTookItsPid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a pid namespace needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare")
	}
	dir := t.TempDir()
	c := controlScript(opMark{}, dir, "echo $$ > cmd.pid", 2*time.Second, nil)
	inner := transport.ShellCommand(c) + ` >/dev/null
p=$(cat '` + dir + `/cmd.pid')
echo $((p - 1)) > /proc/sys/kernel/ns_last_pid || { echo "cannot set the next pid"; exit 0; }
setsid sleep 30 </dev/null >/dev/null 2>&1 &
s=$!
[ "$s" = "$p" ] || { echo "cannot set the next pid: got $s, not $p"; exit 0; }
sleep 3
if kill -0 "$s" 2>/dev/null; then echo survived; kill "$s"; else echo killed; fi
`
	out, err := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "sh", "-c", inner).CombinedOutput()
	got := strings.TrimSpace(string(out))
	switch {
	case err != nil && strings.Contains(got, "unshare"):
		t.Skipf("no pid namespace here: %s", got)
	case strings.HasPrefix(got, "cannot set the next pid"):
		t.Skip(got)
	case got != "survived":
		t.Fatalf("a session that took the pid of a command that ended: %q (%v), want it alive after the command's op_timeout", got, err)
	}
}

// TestControlBreaksALockADeadScriptLeft: a control script that died
// holding its op's lock (a file, or a directory from a release before)
// holds up the op's next attempt for about 2 s, not for good.
func TestControlBreaksALockADeadScriptLeft(t *testing.T) {
	for _, left := range []string{"file", "directory"} {
		dir := t.TempDir()
		request := fmt.Sprintf("T%d-%s#0", time.Now().UnixNano(), left)
		lock := opFilesOf(request).base + ".lock"
		if left == "file" {
			must(t, os.WriteFile(lock, nil, 0o644))
		} else {
			must(t, os.Mkdir(lock, 0o755))
		}
		t.Cleanup(func() { _ = os.RemoveAll(lock) })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		res, err := localRunner{}.Run(ctx, inventory.Host{}, controlScript(opMark{}, dir, "echo ran", time.Minute, &noting{files: opFilesOf(request), attempt: 1}))
		cancel()
		must(t, err)
		if o, complete := parseControl(string(res.Stdout)); !complete || o.RC != 0 || !strings.Contains(o.Output, "ran") {
			t.Errorf("a lock left as a %s: %+v (complete %v, stderr %q), want the command run", left, o, complete, res.Stderr)
		}
		if _, err := os.Stat(lock); err == nil {
			t.Errorf("a lock left as a %s: still there after the op", left)
		}
	}
}
