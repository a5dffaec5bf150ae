package activities

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// trailer ends the output of every control script, so the exit status and
// whether the op_timeout watchdog fired survive whatever the command printed.
const trailer = "__drover_rc__"

// controlScript runs cmd (shell by design: *_cmd fields are the caller's
// shell) in setupPath. The command gets its own session (setsid) and
// stdio that is not the SSH channel, so daemons it starts outlive the SSH
// session and never hold the op open. A watchdog kills the command's
// process group when it runs past timeout; daemons that detached
// themselves into their own session are left alone. When the command
// cannot be run at all, the trailer says why (setup=...) and the script
// prints nothing else: the message is built from the spec, in Go.
func controlScript(setupPath, cmd string, timeout time.Duration) string {
	return controlScriptNoting(setupPath, cmd, timeout, nil)
}

// startOf defines startof PID, which prints the process's start time
// (field 22 of its stat): with its pid, it names one process until a
// reboot, so a note is never taken for a later process given the same pid.
const startOf = `startof() { st=$(cat /proc/$1/stat 2>/dev/null) || return 0; set -- ${st##*) }; echo "${20}"; }`

// noting is how a task op's control script keeps its command findable on
// the host (opfiles.go): it notes the command's process group in the
// attempt's file, and first looks for a command of the same op still
// running, in the files of attempts 1 to upto.
type noting struct {
	files   opFiles
	attempt int32
	upto    int32
}

// controlScriptNoting is controlScript for a task op, with n to note by;
// nil notes nothing. Under the op's lock, it first looks for a command of
// this op still running: an attempt lost with its worker, or with its
// workflow task, left it. It then starts nothing, waits for that command
// as if it were its own (its own watchdog went with the lost attempt),
// and reports it ended. Once it has noted its own command, it ends it at
// once if the op was cancelled meanwhile (the cancel found no note yet).
func controlScriptNoting(setupPath, cmd string, timeout time.Duration, n *noting) string {
	secs := int(timeout.Round(time.Second) / time.Second)
	if secs < 1 {
		secs = 1
	}
	lock, adopt, note, unnote := "", "", "", ""
	if n != nil {
		var notes []string
		for a := int32(1); a <= max(n.upto, n.attempt); a++ {
			notes = append(notes, transport.ShellQuote(n.files.note(a)))
		}
		l, f, c := transport.ShellQuote(n.files.lock()), transport.ShellQuote(n.files.note(n.attempt)), transport.ShellQuote(n.files.cancelled())
		// A lock left by a script that died holding it is broken after 2 s.
		lock = fmt.Sprintf("k=0; until mkdir %[1]s 2>/dev/null; do k=$((k+1)); [ $k -lt 20 ] || { rmdir %[1]s 2>/dev/null; k=0; }; sleep 0.1; done\ntrap 'rmdir %[1]s 2>/dev/null' EXIT\n", l)
		adopt = fmt.Sprintf(`%s
for f in %s; do
  [ -O "$f" ] || continue
  read -r q qs < "$f" 2>/dev/null; case "$q" in ''|*[!0-9]*) continue;; esac
  [ "$q" -gt 1 ] && [ -n "$qs" ] && [ "$(startof "$q")" = "$qs" ] || continue
  rmdir %s 2>/dev/null
  i=0; while [ $i -lt %d ] && [ "$(startof "$q")" = "$qs" ]; do sleep 0.5; i=$((i+1)); done
  t=0; if [ "$(startof "$q")" = "$qs" ]; then t=1; kill -KILL -"$q" 2>/dev/null; fi
  echo "the command an earlier attempt of this op started was still running (process group $q): waited for it"
  printf '\n%s rc=0 timeout=%%d\n' "$t"; exit 0
done
`, startOf, strings.Join(notes, " "), l, 2*secs, trailer)
		note = fmt.Sprintf("rm -f %[1]s; echo \"$p $(startof $p)\" > %[1]s; rmdir %[2]s 2>/dev/null\n[ -e %[3]s ] && kill -KILL -$p 2>/dev/null\n", f, l, c)
		unnote = fmt.Sprintf("rm -f %s\n", f)
	}
	dir := transport.ShellQuote(setupPath)
	return fmt.Sprintf(`[ -e %s ] || { printf '%s rc=97 timeout=0 setup=%s\n'; exit 0; }
[ -d %s ] || { printf '%s rc=97 timeout=0 setup=%s\n'; exit 0; }
cd %s 2>/dev/null || { printf '%s rc=97 timeout=0 setup=%s\n'; exit 0; }
%s%sout=$(mktemp "${TMPDIR:-/tmp}/drover.XXXXXX" 2>/dev/null) || { printf '%s rc=98 timeout=0 setup=%s\n'; exit 0; }
setsid sh -c %s </dev/null >"$out" 2>&1 &
p=$!
%s( i=0; while [ $i -lt %d ] && kill -0 $p 2>/dev/null; do sleep 1; i=$((i+1)); done
  if kill -0 $p 2>/dev/null; then : >"$out.timeout"; kill -KILL -$p 2>/dev/null || kill -KILL $p 2>/dev/null; fi ) </dev/null >/dev/null 2>&1 &
wait $p; rc=$?
%st=0; [ -e "$out.timeout" ] && t=1
head -c 4096 "$out"; rm -f "$out" "$out.timeout"
printf '\n%s rc=%%d timeout=%%d\n' "$rc" "$t"
`, dir, trailer, setupMissing, dir, trailer, setupNotDir, dir, trailer, setupDenied, lock, adopt, trailer, setupNoTemp,
		transport.ShellQuote(cmd), note, secs, unnote, trailer)
}

// Why a control script could not run its command (the trailer's setup=).
const (
	setupMissing = "missing" // setup_path does not exist
	setupNotDir  = "notdir"  // setup_path is not a directory
	setupDenied  = "denied"  // the account may not enter setup_path
	setupNoTemp  = "notemp"  // no temporary file for the command's output
)

// controlOutcome is a control script's result.
type controlOutcome struct {
	RC       int
	TimedOut bool
	// Setup is why the command was not run at all, or "".
	Setup  string
	Output string // the command's own output, trimmed
}

// parseControl reads a control script's output; ok is false when the
// trailer is missing (the script itself did not finish).
func parseControl(out string) (controlOutcome, bool) {
	i := strings.LastIndex(out, trailer+" ")
	if i < 0 {
		return controlOutcome{Output: trim(out)}, false
	}
	var o controlOutcome
	for _, f := range strings.Fields(out[i+len(trailer):]) {
		k, v, _ := strings.Cut(f, "=")
		n, _ := strconv.Atoi(v)
		switch k {
		case "rc":
			o.RC = n
		case "timeout":
			o.TimedOut = n == 1
		case "setup":
			o.Setup = v
		}
	}
	o.Output = trim(out[:i])
	return o, true
}

// controlFailure maps a finished control script to the op's failure, or
// nil when the command succeeded. Every message is one line naming the
// real value.
func controlFailure(verb string, spec proc.Spec, o controlOutcome) *proc.HostResult {
	var f proc.HostResult
	switch {
	case o.Setup == setupMissing:
		f = proc.Fail(proc.CodeBadSpec, "setup_path %s does not exist on this host", spec.SetupPath)
	case o.Setup == setupNotDir:
		f = proc.Fail(proc.CodeBadSpec, "setup_path %s is not a directory on this host", spec.SetupPath)
	case o.Setup == setupDenied:
		f = proc.Fail(proc.CodeBadSpec, "setup_path %s cannot be entered by account %s on this host", spec.SetupPath, spec.Account)
	case o.Setup != "":
		f = proc.Fail(proc.CodeCommandFailed, "%s command not run: no temporary file for its output on this host (check $TMPDIR or /tmp)", verb)
	case o.TimedOut:
		f = proc.Fail(proc.CodeTimeout, "%s command ran past op_timeout %s and was killed", verb, spec.OpTimeout)
	case o.RC != 0 && o.Output == "":
		f = proc.Fail(proc.CodeCommandFailed, "%s command exited %d with no output", verb, o.RC)
	case o.RC != 0:
		f = proc.Fail(proc.CodeCommandFailed, "%s command exited %d: %s", verb, o.RC, o.Output)
	default:
		return nil
	}
	return &f
}

// signalScript sends sig to the process group of pid, falling back to the
// pid alone when the group is the script's own or init's. It first checks
// that pid is still the incarnation that was probed (its start time), so a
// reused pid is never signalled. With wait > 0 it then waits up to wait for
// the process to exit and sends KILL if it has not.
func signalScript(pid int, startTicks uint64, sig string, wait time.Duration) string {
	halfSecs := int(wait / (500 * time.Millisecond))
	return fmt.Sprintf(`pid=%d; want=%d
st=$(cat /proc/$pid/stat 2>/dev/null) || exit 0
set -- ${st##*) }
[ "${20}" = "$want" ] || exit 0
pg=$3
mine=$(cut -d' ' -f5 /proc/$$/stat 2>/dev/null)
if [ "$pg" -gt 1 ] && [ "$pg" != "$mine" ]; then kill -%s -$pg 2>/dev/null || kill -%s $pid; else kill -%s $pid; fi
i=0
while [ $i -lt %d ] && kill -0 $pid 2>/dev/null; do sleep 0.5; i=$((i+1)); done
if [ %d -gt 0 ] && kill -0 $pid 2>/dev/null; then
  if [ "$pg" -gt 1 ] && [ "$pg" != "$mine" ]; then kill -KILL -$pg 2>/dev/null; fi
  kill -KILL $pid 2>/dev/null
fi
exit 0
`, pid, startTicks, sig, sig, sig, halfSecs, halfSecs)
}

// defaultCommand is the job-platform convention for a control command a
// request did not give: `cd SETUP_PATH && ./VERB.sh PROC_NAME &` for sh.
func defaultCommand(verb string, spec proc.Spec) string {
	return fmt.Sprintf("cd %s && ./%s.sh %s &", transport.ShellQuote(spec.SetupPath), verb, transport.ShellQuote(spec.ProcName))
}

// hasAnyCommand reports whether the spec names any control command; a spec
// with none follows the job-platform convention for all of them.
func hasAnyCommand(s proc.Spec) bool {
	return s.StartCmd != "" || s.StopCmd != "" || s.RestartCmd != "" || s.ReloadCmd != "" || s.KillCmd != ""
}

// commandFor picks the command for verb: the spec's own, else the
// job-platform default when the spec gives no commands at all, else "" (the
// caller then uses signals: stop and kill need no script).
func commandFor(p platform, verb string, s proc.Spec) string {
	var c string
	switch verb {
	case "start":
		c = s.StartCmd
	case "stop":
		c = s.StopCmd
	case "restart":
		c = s.RestartCmd
	case "reload":
		c = s.ReloadCmd
	case "kill":
		c = s.KillCmd
	}
	if c != "" {
		return c
	}
	if !hasAnyCommand(s) {
		return p.defaultCommand(verb, s)
	}
	if verb == "start" {
		// A spec with other commands but no start_cmd still starts by the
		// convention: there is nothing else to start it with.
		return p.defaultCommand(verb, s)
	}
	return ""
}

// trim keeps command output short enough for error_msg, and on one line:
// a per-host message is one line of a table or a log. Lines are joined
// with " | ", empty ones dropped.
func trim(s string) string {
	const max = 1024
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	kept := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			kept = append(kept, l)
		}
	}
	s = strings.Join(kept, " | ")
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}
