package activities

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// checked is a post-check probe made in the same exec as its command.
type checked struct {
	p probeResult
	f *proc.HostResult
}

// checkMarker separates a control script's output from the probe that
// follows it in one exec. No probe line can be it: each starts with its
// record letter and a tab.
const checkMarker = "__drover_check__"

// guardMarker starts a guarded control script's output when its guard did
// not hold: the probe follows it, and nothing was run.
const guardMarker = "__drover_guard__"

// thenMarker starts the output of a stop that ended its process and ran a
// restart's start_cmd in the same exec: the start's output and check
// follow. aloneMarker starts one that stopped there: the stop's follow.
const (
	thenMarker  = "__drover_then__"
	aloneMarker = "__drover_alone__"
)

// startGuard runs a start with no probe first when the pid file names no
// live process: no probe could then find it alive (guard_holds in
// scripts/lib_probe.sh).
const startGuard = "none"

// incarnationGuard runs a stop with no probe first when the pid file still
// names the incarnation an op or a poll found alive.
func incarnationGuard(pid int, startTicks uint64) string {
	return strconv.Itoa(pid) + " " + strconv.FormatUint(startTicks, 10)
}

// controlExec is one exec of checked_control.sh: a control command and,
// on a platform that can, its post-check after wait (with status 0, or any
// status when anyExit). With a guard, the op's probe before the command
// shares the exec too, and the command runs only as the spec's account
// when the guard holds. With then (a guarded stop's), a restart's
// start_cmd runs in the same exec once the stop has ended the process,
// and is checked after thenWait.
type controlExec struct {
	verb, cmd string
	wait      time.Duration
	anyExit   bool
	guard     string
	then      string
	thenWait  time.Duration
}

// execOutcome is what a controlExec's exec told: f is the command's
// failure, post the check after it, when made; pre the probe of a guard
// that did not hold (nothing ran). When then ran, f and post are its.
type execOutcome struct {
	f         *proc.HostResult
	post, pre *checked
	then      bool
}

// checkedControlScript is x as a script: the post-check costs no SSH round
// trip of its own (scripts/checked_control.sh).
func checkedControlScript(m opMark, setupPath string, timeout time.Duration, n *noting, pidFile string, host *hostKnown, account string, x controlExec) transport.Command {
	anyArg := "0"
	if x.anyExit {
		anyArg = "1"
	}
	args := append([]string{m.file, m.request}, controlArgs(setupPath, x.cmd, timeout, n)...)
	args = append(args, anyArg, seconds(x.wait), pidFile)
	args = append(args, host.opArgs()...)
	if x.guard != "" {
		args = append(args, x.guard, account)
		if x.then != "" {
			args = append(args, x.then, seconds(x.thenWait))
		}
	}
	return bounded(script("checked_control.sh", args...))
}

// splitGuarded returns the probe a guarded control script printed when
// its guard did not hold.
func splitGuarded(out string) (probe string, stopped bool) {
	return strings.CutPrefix(out, guardMarker+"\n")
}

// splitChecked cuts a checked control script's output into the control
// part and the probe's, if the probe ran.
func splitChecked(out string) (control, probe string, probed bool) {
	i := strings.LastIndex(out, "\n"+checkMarker+"\n")
	if i < 0 {
		return out, "", false
	}
	return out[:i+1], out[i+len(checkMarker)+2:], true
}

// controlThenCheck runs a control command and, on a platform that can,
// the post-check probe after wait in the same exec. It returns the
// command's failure, if any, and the probe when it ran.
func (r *opRun) controlThenCheck(verb, cmd string, wait time.Duration, anyExit bool) (*proc.HostResult, *checked) {
	if !r.plat.checksInControl() {
		return r.runControl(verb, cmd), nil
	}
	f, c, _ := r.guardedControl(verb, cmd, wait, anyExit, "")
	return f, c
}

// guardedControl is controlThenCheck with the op's probe before the
// command in the same exec too, on a platform that checks in control:
// with a guard that did not hold, nothing ran and pre is that probe.
func (r *opRun) guardedControl(verb, cmd string, wait time.Duration, anyExit bool, guard string) (f *proc.HostResult, post, pre *checked) {
	o := r.execControl(controlExec{verb: verb, cmd: cmd, wait: wait, anyExit: anyExit, guard: guard})
	return o.f, o.post, o.pre
}

// execControl runs x in one exec and reads what it told.
func (r *opRun) execControl(x controlExec) execOutcome {
	if r.a.Sleep != nil {
		// Tests shorten waits in Go; the host then waits nothing.
		for _, w := range []*time.Duration{&x.wait, &x.thenWait} {
			if err := r.a.Sleep(r.ctx, *w); err != nil {
				f := proc.Fail(proc.CodeTimeout, "post-check interrupted: %v", err)
				return execOutcome{f: &f}
			}
			*w = 0
		}
	}
	// The control part notes its process group, as runControl's does, so
	// a cancelled task ends the command it started.
	n := r.noting()
	c := checkedControlScript(r.opMark(), r.spec.SetupPath, r.spec.OpTimeout, n, r.spec.PidPath, r.known(), r.spec.Account, x)
	bound := r.spec.OpTimeout + 15*time.Second + x.wait
	if x.then != "" {
		bound += r.spec.OpTimeout + x.thenWait
	}
	res, err := r.a.Runner.Run(r.ctx, r.host, r.command(c, bound))
	if err != nil {
		r.endIfCancelled(n.pidFile())
		f := transportFailure(err)
		return execOutcome{f: &f}
	}
	out := string(res.Stdout)
	if x.guard != "" {
		if probe, stopped := splitGuarded(out); stopped {
			p, pf := r.readProbe(res.ExitCode, probe, string(res.Stderr), false, knownProc{})
			return execOutcome{pre: &checked{p: p, f: pf}}
		}
	}
	var o execOutcome
	verb, anyExit := x.verb, x.anyExit
	if x.then != "" {
		if rest, ran := strings.CutPrefix(out, thenMarker+"\n"); ran {
			out, o.then, verb, anyExit = rest, true, "restart", false
		} else {
			out, _ = strings.CutPrefix(out, aloneMarker+"\n")
		}
	}
	ctl, probe, probed := splitChecked(out)
	ran, complete := parseControl(ctl)
	if !complete {
		f := proc.Fail(proc.CodeCommandFailed, "%s command did not finish (exit %d): %s", verb, res.ExitCode, firstNonEmpty(ran.Output, trim(string(res.Stderr))))
		o.f = &f
		return o
	}
	o.f = controlFailure(verb, r.spec, ran)
	if !probed || (o.f != nil && !anyExit) {
		return o
	}
	p, pf := r.readProbe(res.ExitCode, probe, string(res.Stderr), false, knownProc{})
	o.post = &checked{p: p, f: pf}
	return o
}

// startAndCheck runs a start-like command, then checks the process stays
// alive through the start-check window.
func (r *opRun) startAndCheck(verb, cmd string) HostOpOutput {
	f, first := r.controlThenCheck(verb, cmd, r.spec.StartCheck, false)
	return r.startChecked(verb, f, first)
}

// startChecked judges a start-like command that ran: f is its failure,
// first the check its exec made, if any.
func (r *opRun) startChecked(verb string, f *proc.HostResult, first *checked) HostOpOutput {
	if f != nil {
		return r.withLog(failed(*f))
	}
	p, f := r.postStartCheck(first)
	if f != nil {
		return failed(*f)
	}
	if !p.alive {
		if r.spec.AutoType != proc.AutoResident {
			// A one-shot or periodic run may be done already: success.
			return HostOpOutput{Result: ok(), Started: true}
		}
		return r.withLog(observe(HostOpOutput{Result: proc.Fail(proc.CodePostCheck,
			"%s process (%s) failed, for post-check status not alive, %s after the %s command",
			verb, r.spec.ProcName, policies.StartCheckSpan(r.spec), verb)}, p))
	}
	return observe(HostOpOutput{Result: ok(), Started: true}, p)
}

// postStartCheck checks liveness at StartCheck (first, when the command's
// exec already did), then each second until StartCheckEnd; the first dead
// check ends it.
func (r *opRun) postStartCheck(first *checked) (probeResult, *proc.HostResult) {
	if first == nil {
		if err := r.sleep(r.spec.StartCheck); err != nil {
			f := proc.Fail(proc.CodeTimeout, "post-check interrupted: %v", err)
			return probeResult{}, &f
		}
	}
	for waited := r.spec.StartCheck; ; waited += time.Second {
		p, f := r.nextCheck(&first)
		if f != nil || !p.alive || waited >= r.spec.StartCheckEnd {
			return p, f
		}
		if err := r.sleep(time.Second); err != nil {
			f := proc.Fail(proc.CodeTimeout, "post-check interrupted: %v", err)
			return probeResult{}, &f
		}
	}
}

// nextCheck is a post-check's next look at the process: *first, the check
// the command's exec made, if any, once; then a probe each time.
func (r *opRun) nextCheck(first **checked) (probeResult, *proc.HostResult) {
	if c := *first; c != nil {
		*first = nil
		return c.p, c.f
	}
	return r.probe(0, false)
}

// endByCommand runs stop_cmd or kill_cmd and judges the op by its outcome:
// the caller asked for the process to be gone. Real stop scripts exit
// non-zero once the process has already gone (a second kill finds nothing),
// so a command that exited non-zero still answers 0 when the process is
// gone after the check, and error_msg says how the command exited. A
// command that ran past op_timeout, or a host that could not be reached,
// stays a failure: nothing is known of the outcome then.
func (r *opRun) endByCommand(verb, cmd string, before probeResult) HostOpOutput {
	f, first := r.controlThenCheck(verb, cmd, 0, true)
	return r.endedByCommand(verb, f, first, before, r.spec.StopCheck)
}

// endedByCommand judges an ending command that ran: f is its failure,
// first the check its exec made, if any, and wait what is left of
// stop_check for the process to go.
func (r *opRun) endedByCommand(verb string, f *proc.HostResult, first *checked, before probeResult, wait time.Duration) HostOpOutput {
	if f != nil && f.Code != proc.CodeCommandFailed {
		return failed(*f)
	}
	out := r.waitGone(verb, before, wait, first)
	if f == nil {
		return out
	}
	switch out.Result.Code {
	case proc.CodeSuccess:
		out.Result.Message = fmt.Sprintf("process(%s) is gone, but the %s", r.spec.ProcName, f.Message)
	case proc.CodePostCheck:
		out.Result.Message += "; the " + f.Message
	}
	return out
}

// waitGone checks, for up to wait, that the probed incarnation is gone;
// first, when given, is the first check, made by the command's exec.
func (r *opRun) waitGone(verb string, before probeResult, wait time.Duration, first *checked) HostOpOutput {
	deadline := wait
	for waited := time.Duration(0); ; waited += time.Second {
		p, f := r.nextCheck(&first)
		if f != nil {
			return failed(*f)
		}
		gone := !p.alive || !proc.SameIncarnation(p.sample, before.sample.StartTicks)
		if gone && !p.alive {
			return HostOpOutput{Result: ok()}
		}
		if waited >= deadline {
			if gone {
				// Something else started a new incarnation meanwhile.
				return observe(HostOpOutput{Result: ok()}, p)
			}
			return observe(HostOpOutput{Result: proc.Fail(proc.CodePostCheck,
				"%s process (%s) failed, for post-check status still alive, pid %d", verb, r.spec.ProcName, p.sample.Pid)}, p)
		}
		if err := r.sleep(time.Second); err != nil {
			return failed(proc.Fail(proc.CodeTimeout, "post-check interrupted: %v", err))
		}
	}
}
