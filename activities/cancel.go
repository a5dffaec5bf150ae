package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/transport"
)

// A control command runs in its own session, so that daemons it starts
// outlive the SSH session: ending the session (what a cancelled context
// does to the runner's command) leaves the command itself running. When a
// task is cancelled, its op's command must end too, so the control script
// notes the command's process group in a file named after the request, and
// a cancelled op ends that group with a second, short command. A worker
// that is stopping, or that died, is not a cancel: its command is left to
// finish, and a retry finds what it did.

// endTimeout bounds the command that ends a cancelled op's command.
const endTimeout = 10 * time.Second

// controlPidFile names the file a request's control command notes its
// process group in: one per request and attempt, under /tmp, where every
// account may write.
func controlPidFile(requestID string, attempt int32) string {
	sum := sha256.Sum256([]byte(requestID))
	return fmt.Sprintf("/tmp/drover-ctl-%s-%d.pid", hex.EncodeToString(sum[:8]), attempt)
}

// endScript kills the process group noted in pidFile. Only a file the
// account owns is read, so another user cannot name a pid for it to kill.
func endScript(pidFile string) string {
	f := transport.ShellQuote(pidFile)
	return fmt.Sprintf(`[ -O %[1]s ] || exit 0
p=$(cat %[1]s); rm -f %[1]s
case "$p" in ''|*[!0-9]*) exit 0;; esac
[ "$p" -gt 1 ] && { kill -KILL -"$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null; }
exit 0
`, f)
}

// notedControl is the control script of cmd, noting its process group when
// the op can be cancelled (a task's op on a Linux host), and the file.
func (r *opRun) notedControl(cmd string) (script, pidFile string) {
	if _, linux := r.plat.(linuxPlatform); !linux || r.in.RequestID == "" || !activity.IsActivity(r.ctx) {
		return r.plat.controlScript(r.spec, cmd), ""
	}
	pidFile = controlPidFile(r.in.RequestID, r.attempt())
	return controlScriptNoting(r.spec.SetupPath, cmd, r.spec.OpTimeout, pidFile), pidFile
}

// endIfCancelled ends the command noted in pidFile when the op was
// cancelled by its workflow (not when the worker is stopping).
func (r *opRun) endIfCancelled(pidFile string) {
	if pidFile == "" || !errors.Is(r.ctx.Err(), context.Canceled) {
		return
	}
	select {
	case <-activity.GetWorkerStopChannel(r.ctx):
		return // a deploy, not a cancel: the command finishes
	default:
	}
	r.end(endScript(pidFile))
}

// end runs a script that ends noted commands, within endTimeout, also
// when the op's own context has ended (a cancel is why it runs).
func (r *opRun) end(script string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), endTimeout)
	defer cancel()
	_, _ = r.a.Runner.Run(ctx, r.host, r.command(script, endTimeout))
}

// endAttempts ends, in one short command, what the first EndAttempts
// attempts of EndRequestID noted. Each file's end runs in a subshell of
// its own, as endScript exits; a file already gone (its command finished,
// or was ended by its own attempt) ends nothing.
func (r *opRun) endAttempts() {
	if _, linux := r.plat.(linuxPlatform); !linux || r.in.EndAttempts < 1 || r.in.EndRequestID == "" {
		return
	}
	var b strings.Builder
	for n := int32(1); n <= min(r.in.EndAttempts, policies.OpAttempts); n++ {
		fmt.Fprintf(&b, "(\n%s)\n", endScript(controlPidFile(r.in.EndRequestID, n)))
	}
	r.end(b.String())
}
