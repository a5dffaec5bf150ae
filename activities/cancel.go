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
	"github.com/drover-sh/drover/proc"
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

// noting is how the op's control command is noted: for a task's op on a
// Linux host, so that a cancel can end it; nil otherwise.
func (r *opRun) noting() *noting {
	if _, linux := r.plat.(linuxPlatform); !linux || r.in.RequestID == "" || !activity.IsActivity(r.ctx) {
		return nil
	}
	return &noting{files: opFilesOf(r.in.RequestID), attempt: r.attempt(), upto: policies.OpAttempts}
}

// A task op that acts on a process first writes its request id to the
// process's op marker, one small file per process and account. An attempt
// lost with its workflow task (a local activity's worker died) is run again
// as if new; finding the marker, it knows the process is as it is because
// of this very op: a start then answers 0, not 828.

// opMarkerFile names the marker of the op's process on its host.
func (r *opRun) opMarkerFile() string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%d|%s|%s|%s", r.plat.account(r.spec), r.in.Target.CloudID, r.in.Target.IP,
		r.in.Process.Namespace, r.in.Process.Name)))
	return fmt.Sprintf("/tmp/drover-op-%s", hex.EncodeToString(sum[:8]))
}

// marks reports whether the op writes the marker: a task's op on a Linux
// host.
func (r *opRun) marks() bool {
	_, linux := r.plat.(linuxPlatform)
	return linux && r.in.RequestID != "" && r.in.Op != proc.OpStatus
}

// opMark is the marker the op's control and signal scripts write first,
// when the op writes one.
func (r *opRun) opMark() opMark {
	if !r.marks() {
		return opMark{}
	}
	return opMark{file: r.opMarkerFile(), request: r.in.RequestID}
}

// ranBefore reports whether an earlier attempt of this very op acted on
// the process: the marker holds its request id.
func (r *opRun) ranBefore() bool {
	if !r.marks() {
		return false
	}
	res, err := r.a.Runner.Run(r.ctx, r.host, r.command(script("marker.sh", r.opMarkerFile()), r.spec.OpTimeout))
	return err == nil && strings.TrimSpace(string(res.Stdout)) == r.in.RequestID
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
	r.end(endScript(opFilesOf(r.in.RequestID), r.attempt()))
}

// end runs a script that ends noted commands, within endTimeout, also
// when the op's own context has ended (a cancel is why it runs).
func (r *opRun) end(c transport.Command) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), endTimeout)
	defer cancel()
	_, _ = r.a.Runner.Run(ctx, r.host, r.command(c, endTimeout))
}

// endAttempts ends, in one short command, what the first EndAttempts
// attempts of EndRequestID noted; a file already gone (its command
// finished, or was ended by its own attempt) ends nothing.
func (r *opRun) endAttempts() {
	if _, linux := r.plat.(linuxPlatform); !linux || r.in.EndAttempts < 1 || r.in.EndRequestID == "" {
		return
	}
	attempts := make([]int32, 0, r.in.EndAttempts)
	for n := int32(1); n <= min(r.in.EndAttempts, policies.OpAttempts); n++ {
		attempts = append(attempts, n)
	}
	r.end(endScript(opFilesOf(r.in.EndRequestID), attempts...))
}
