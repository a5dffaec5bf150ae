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

// opMark is the op marker a script writes before it acts (see
// opMarkerFile): the file and the request id; the zero opMark writes none.
type opMark struct{ file, request string }

// noting is how a task op's control script keeps its command findable on
// the host (opfiles.go): it notes the command's process group in the
// attempt's file, and first looks for a command of the same op still
// running, in the files of attempts 1 to upto.
type noting struct {
	files   opFiles
	attempt int32
	upto    int32
}

// pidFile is the note of the command, "" when n is nil.
func (n *noting) pidFile() string {
	if n == nil {
		return ""
	}
	return n.files.note(n.attempt)
}

// controlArgs are lib_control.sh's control arguments: cmd run in setupPath
// within timeout, noted by n (nil: not noted).
func controlArgs(setupPath, cmd string, timeout time.Duration, n *noting) []string {
	secs := max(int(timeout.Round(time.Second)/time.Second), 1)
	base, attempt, last := "", "", ""
	if n != nil {
		base, attempt, last = n.files.base, itoa(int64(n.attempt)), itoa(int64(max(n.upto, n.attempt)))
	}
	return []string{setupPath, cmd, strconv.Itoa(secs), base, attempt, last}
}

// controlScript runs cmd (shell by design: *_cmd fields are the caller's
// shell) in setupPath, bounded by timeout, after writing m; with n, a task
// op's, it notes the command (scripts/lib_control.sh).
func controlScript(m opMark, setupPath, cmd string, timeout time.Duration, n *noting) transport.Command {
	return bounded(script("control.sh", append([]string{m.file, m.request}, controlArgs(setupPath, cmd, timeout, n)...)...))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

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

// signalScript sends sig to the process group of the probed incarnation
// (pid, startTicks), after writing m; with wait > 0 it sends KILL when the
// process has not exited after wait (scripts/signal.sh).
func signalScript(m opMark, pid int, startTicks uint64, sig string, wait time.Duration) transport.Command {
	return script("signal.sh", m.file, m.request, strconv.Itoa(pid), strconv.FormatUint(startTicks, 10), sig,
		strconv.Itoa(int(wait/(500*time.Millisecond))))
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
