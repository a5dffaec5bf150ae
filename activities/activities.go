// Package activities is what happens on one host: probing processes and
// running their control commands. Activities return small summaries, never
// raw logs, and resolve credentials themselves so none enter workflow inputs.
package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-sh/drover/internal/filestore"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// HostOpInput asks for one op on one registered process on one host. The
// spec already has its defaults.
type HostOpInput struct {
	RequestID    string            `json:"request_id"`
	Op           proc.OpType       `json:"op_type"`
	Target       proc.Target       `json:"target"`
	Process      proc.ProcessID    `json:"process"`
	Spec         proc.Spec         `json:"spec"`
	Registration proc.Registration `json:"registration"`
	// Pid and StartTicks are the incarnation last seen, if any.
	Pid        int    `json:"pid,omitempty"`
	StartTicks uint64 `json:"start_ticks,omitempty"`
	// Attempt counts a task op's attempts, which its host workflow makes
	// one activity each; 0 when the server retries the activity.
	Attempt int32 `json:"attempt,omitempty"`
	// EndRequestID and EndAttempts, on the probe after a task op was
	// cancelled with attempts of it failed, first end the commands those
	// first EndAttempts attempts noted: an attempt whose worker died left
	// its command running, for a retry that will now never come.
	EndRequestID string `json:"end_request_id,omitempty"`
	EndAttempts  int32  `json:"end_attempts,omitempty"`
}

// HostOpOutput is the op's result and what it learned of the process.
type HostOpOutput struct {
	Result proc.HostResult `json:"result"`
	// Alive, Pid and StartTicks describe the process after the op.
	Alive      bool   `json:"alive"`
	Pid        int    `json:"pid,omitempty"`
	StartTicks uint64 `json:"start_ticks,omitempty"`
	// Started is set when this op started the process (start, restart).
	Started bool `json:"started,omitempty"`
}

// Activities holds what host activities need; methods are registered with
// the worker.
type Activities struct {
	Inventory *inventory.Inventory
	Runner    transport.Runner
	// Files opens SFTP sessions for the file ops; Store holds the
	// contents they push and the log tails they read.
	Files transport.FileOpener
	Store filestore.Store
	// Sleep waits between a control command and its post-check; tests may
	// shorten it. Nil means a real, cancellable wait.
	Sleep func(ctx context.Context, d time.Duration) error
	// Hosts reaches host workflows for shard watches; nil on a worker
	// that runs none.
	Hosts HostWorkflows

	shardOnce sync.Once
	shards    *shardWorker
	facts     hostFacts
	seen      procsSeen
}

// opRun is one op in progress on one host.
type opRun struct {
	a    *Activities
	ctx  context.Context
	host inventory.Host
	plat platform
	in   HostOpInput
	spec proc.Spec
	// probed is the probe a guarded exec made instead of running its
	// command, for the op's first look at the process.
	probed *checked
}

// HostOp runs one op on one host. Per-host failures come back as result
// codes, not errors: one host's trouble must never fail the workflow.
func (a *Activities) HostOp(ctx context.Context, in HostOpInput) (HostOpOutput, error) {
	host, ok := a.Inventory.Lookup(in.Target.HostID())
	if !ok {
		return failed(proc.Fail(proc.CodeUnknownHost, "host bk_cloud_id=%d ip=%s is not in the inventory", in.Target.CloudID, in.Target.IP)), nil
	}
	spec := policies.WithDefaults(in.Spec)
	plat := platformFor(host)
	if why := plat.fits(spec); why != "" {
		return failed(proc.Fail(proc.CodeBadSpec, "%s; %s is reached over %s", why, in.Target.IP, host.Transport)), nil
	}
	defer keepAlive(ctx)()
	r := &opRun{a: a, ctx: ctx, host: host, plat: plat, in: in, spec: spec}
	r.endAttempts()
	var out HostOpOutput
	switch in.Op {
	case proc.OpStatus:
		out = r.status()
	case proc.OpStart:
		out = r.start()
	case proc.OpStop:
		out = r.stop()
	case proc.OpRestart:
		out = r.restart()
	case proc.OpReload:
		out = r.reload()
	case proc.OpKill:
		out = r.kill()
	default:
		return failed(proc.Fail(proc.CodeBadOpType, "op_type %d has no host action", int(in.Op))), nil
	}
	if err := OutlastedLocally(ctx); err != nil {
		return HostOpOutput{}, err
	}
	if err := attemptLost(ctx); err != nil {
		return HostOpOutput{}, err
	}
	return out, nil
}

// OutlastedLocally is, for an op run as a local activity whose budget
// ended, the timeout its host workflow reads as "go on as an activity":
// what the op saw when its budget cut it short is not its answer. The SDK
// reports the same timeout when it gives the local run up first; this
// covers the run that returns in the moment before it does.
func OutlastedLocally(ctx context.Context) error {
	if !activity.IsActivity(ctx) || !activity.GetInfo(ctx).IsLocalActivity || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return nil
	}
	return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)
}

// attemptLost is why an op's answer must not be recorded, or nil. An op
// answers whatever happened on the host, also when its deadline passed
// or its task's cancel ended it. But the SDK also ends an attempt's
// context when its heartbeats stop reaching a loaded server, or the
// server has already given the attempt up: what the op then saw ("no
// free session ... context canceled") is the worker's, not the host's,
// and an error has the attempt retried (an attempt after the first
// treats the host as possibly acted on) rather than answered.
func attemptLost(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(ctx)
	var asked *temporal.CanceledError
	if errors.Is(cause, context.DeadlineExceeded) || errors.As(cause, &asked) {
		return nil
	}
	return fmt.Errorf("attempt given up by the worker, not by its deadline or a cancel: %v", cause)
}

func failed(r proc.HostResult) HostOpOutput { return HostOpOutput{Result: r} }

func ok() proc.HostResult {
	return proc.HostResult{Code: proc.CodeSuccess, Message: proc.CodeSuccess.Message()}
}

// retried reports whether an earlier attempt of this op may already have
// acted on the host (the worker died mid-op).
func (r *opRun) retried() bool { return r.attempt() > 1 }

// attempt is the op's attempt: its workflow's count, or the server's.
func (r *opRun) attempt() int32 {
	n := r.in.Attempt
	if activity.IsActivity(r.ctx) {
		n = max(n, activity.GetInfo(r.ctx).Attempt)
	}
	return n
}

// probeResult is one liveness probe of the op's process.
type probeResult struct {
	host   proc.HostInfo
	sample proc.Sample
	alive  bool
	extras proc.StatusExtras
}

// firstProbe is the op's probe before it acts: the one a guarded exec
// made, when it made one, else a probe of its own.
func (r *opRun) firstProbe() (probeResult, *proc.HostResult) {
	if c := r.probed; c != nil {
		r.probed = nil
		return c.p, c.f
	}
	return r.probe(0, false)
}

// probe samples the process with one exec; window > 0 measures current cpu.
func (r *opRun) probe(window time.Duration, extras bool) (probeResult, *proc.HostResult) {
	host := r.known()
	var seen knownProc
	if extras && host != nil {
		// A status of the incarnation a probe before proved the spec's
		// is told it, and forks no readlink and no tr.
		seen = r.a.seen.get(r.seenKey(), host.bootTime)
	}
	res, err := r.a.Runner.Run(r.ctx, r.host, r.command(r.plat.statusScript(r.spec, window, extras, host, seen.arg()), r.spec.OpTimeout))
	if err != nil {
		f := transportFailure(err)
		return probeResult{}, &f
	}
	return r.readProbe(res.ExitCode, string(res.Stdout), string(res.Stderr), extras, seen)
}

// readProbe reads a probe's output; exit is its exit status, and seen the
// incarnation the probe was told of, if any.
func (r *opRun) readProbe(exit int, stdout, stderr string, extras bool, seen knownProc) (probeResult, *proc.HostResult) {
	if exit != 0 {
		f := proc.Fail(proc.CodeCommandFailed, "probe exited %d: %s", exit, trim(stderr))
		return probeResult{}, &f
	}
	info, samples, err := r.plat.parseProbe(stdout, 1)
	if err != nil {
		f := proc.HostResult{Code: proc.CodeInternal, Message: trim(err.Error())}
		return probeResult{}, &f
	}
	if !r.plat.ranAs(info.User, r.spec) {
		// Never report what another account saw as this account's view.
		f := proc.Fail(proc.CodeSudoRefused, "probe ran as %q, not as account %q", info.User, r.spec.Account)
		return probeResult{}, &f
	}
	r.a.facts.learn(r.host, r.plat.account(r.spec), info)
	seen.recall(&samples[0])
	p := probeResult{host: info, sample: samples[0], alive: r.plat.alive(samples[0], r.spec.ProcName)}
	r.a.seen.learn(r.seenKey(), info.BootTime, provenProc(p.sample, p.alive))
	if extras {
		p.extras = parseExtras(stdout)
	}
	return p, nil
}

// known is what an earlier probe read of this host's boot, as the spec's
// account.
func (r *opRun) known() *hostKnown { return r.a.facts.get(r.host, r.plat.account(r.spec)) }

// seenKey names the op's process in Activities.seen.
func (r *opRun) seenKey() string { return seenKey(r.host, r.plat.account(r.spec), r.spec.PidPath) }

// command is c as the spec's account, in the platform's language.
func (r *opRun) command(c transport.Command, timeout time.Duration) transport.Command {
	c.Shell, c.Account, c.Timeout = r.plat.shell(), r.plat.account(r.spec), timeout
	return c
}

// observe turns a probe into the output's process fields.
func observe(out HostOpOutput, p probeResult) HostOpOutput {
	out.Alive = p.alive
	if p.alive {
		out.Pid, out.StartTicks = p.sample.Pid, p.sample.StartTicks
	}
	return out
}

func (r *opRun) status() HostOpOutput {
	p, f := r.probe(policies.StatusCPUWindow, true)
	if f != nil {
		return failed(*f)
	}
	// The content names the host by the agent id the caller sent, else by
	// the inventory's, else by GSE 2.0's cloud:ip form.
	target := r.in.Target
	if target.AgentID == "" {
		target.AgentID = r.host.AgentID
	}
	content := proc.EncodeContent(proc.BuildStatus(target, r.spec, p.host, p.sample, p.alive, r.in.Registration, p.extras))
	res := ok()
	if !p.alive {
		res = proc.HostResult{Code: proc.CodeNotRunning, Message: proc.NotRunningMessage(r.spec.ProcName)}
	}
	res.Content = content
	return observe(HostOpOutput{Result: res}, p)
}

// runControl runs one control command and maps its failure to a result.
func (r *opRun) runControl(verb, cmd string) *proc.HostResult {
	// The script's own watchdog ends the command at op_timeout; this
	// bound only covers a host that stops answering.
	n := r.noting()
	res, err := r.a.Runner.Run(r.ctx, r.host, r.command(r.plat.controlScript(r.spec, cmd, r.opMark(), n), r.spec.OpTimeout+15*time.Second))
	if err != nil {
		r.endIfCancelled(n.pidFile())
		f := transportFailure(err)
		return &f
	}
	o, complete := parseControl(string(res.Stdout))
	switch {
	case !complete:
		f := proc.Fail(proc.CodeCommandFailed, "%s command did not finish (exit %d): %s", verb, res.ExitCode, firstNonEmpty(o.Output, trim(string(res.Stderr))))
		return &f
	}
	return controlFailure(verb, r.spec, o)
}

func (r *opRun) start() HostOpOutput {
	cmd := commandFor(r.plat, "start", r.spec)
	if r.plat.checksInControl() {
		// One exec when no process is there: the probe shares it.
		f, first, pre := r.guardedControl("start", cmd, r.spec.StartCheck, false, startGuard)
		if pre == nil {
			return r.startChecked("start", f, first)
		}
		return r.startProbed(pre.p, pre.f, cmd)
	}
	p, f := r.probe(0, false)
	return r.startProbed(p, f, cmd)
}

// startProbed starts the process the probe p (or its failure f) found not
// running.
func (r *opRun) startProbed(p probeResult, f *proc.HostResult, cmd string) HostOpOutput {
	if f != nil {
		return failed(*f)
	}
	if p.alive {
		if r.retried() || r.ranBefore() {
			// An earlier attempt started it before the worker was lost.
			return observe(HostOpOutput{Result: ok(), Started: true}, p)
		}
		return observe(HostOpOutput{Result: proc.HostResult{Code: proc.CodeAlreadyRunning,
			Message: fmt.Sprintf("process(%s) is already running, pid %d", r.spec.ProcName, p.sample.Pid)}}, p)
	}
	return r.startAndCheck("start", cmd)
}

func (r *opRun) stop() HostOpOutput {
	if out, ran, _ := r.stopKnown("stop", false); ran {
		return out
	}
	p, out := r.toEnd("stop")
	if out != nil {
		return *out
	}
	return r.stopAndCheck(p)
}

// stopKnown stops, in one exec, the incarnation an op or a poll last found
// alive, when the pid file still names it and stop_cmd ends it: ran is
// false when it could not, and the op goes on from the exec's probe, if
// it made one, as from its own. For a restart, once the stop has ended
// the process, start_cmd runs and is checked in the same exec too:
// restarted says it did, and out is then the restart's answer.
func (r *opRun) stopKnown(verb string, restart bool) (out HostOpOutput, ran, restarted bool) {
	cmd := commandFor(r.plat, "stop", r.spec)
	if !r.plat.checksInControl() || cmd == "" || r.in.Pid <= 0 || r.in.StartTicks == 0 {
		return HostOpOutput{}, false, false
	}
	x := controlExec{verb: verb, cmd: cmd, anyExit: true, guard: incarnationGuard(r.in.Pid, r.in.StartTicks)}
	if restart {
		// The exec looks for the stopped process within stop_check before
		// it starts; a stop's check after that has no wait left.
		x.wait, x.then, x.thenWait = r.spec.StopCheck, commandFor(r.plat, "start", r.spec), r.spec.StartCheck
	}
	o := r.execControl(x)
	switch {
	case o.pre != nil:
		r.probed = o.pre
		return HostOpOutput{}, false, false
	case o.then:
		return r.startChecked("restart", o.f, o.post), true, true
	}
	before := probeResult{alive: true, sample: proc.Sample{Pid: r.in.Pid, StartTicks: r.in.StartTicks}}
	return r.endedByCommand(verb, o.f, o.post, before, r.spec.StopCheck-x.wait), true, false
}

// toEnd probes the process an op that ends it (stop, kill) is to end. out
// is the op's answer when there is nothing to end: a failed probe's, or
// none running.
func (r *opRun) toEnd(verb string) (probeResult, *HostOpOutput) {
	p, f := r.firstProbe()
	if f != nil {
		out := failed(*f)
		return p, &out
	}
	if !p.alive {
		if r.retried() || r.ranBefore() {
			// An earlier attempt, lost with its worker, may have ended
			// it: the caller asked for it gone, and it is.
			return p, &HostOpOutput{Result: ok()}
		}
		return p, &HostOpOutput{Result: proc.HostResult{Code: proc.CodeNotRunning,
			Message: fmt.Sprintf("no need to %s the process(%s) that is not running", verb, r.spec.ProcName)}}
	}
	return p, nil
}

// stopAndCheck stops a live process with stop_cmd, or TERM then KILL to its
// process group, then checks that it is gone.
func (r *opRun) stopAndCheck(p probeResult) HostOpOutput {
	if cmd := commandFor(r.plat, "stop", r.spec); cmd != "" {
		return r.endByCommand("stop", cmd, p)
	}
	if f := r.signal(p, "TERM", r.spec.StopCheck); f != nil {
		return failed(*f)
	}
	return r.waitGone("stop", p, 0, nil)
}

func (r *opRun) signal(p probeResult, sig string, wait time.Duration) *proc.HostResult {
	res, err := r.a.Runner.Run(r.ctx, r.host, r.command(r.plat.signalScript(r.opMark(), p.sample.Pid, p.sample.StartTicks, sig, wait), wait+r.spec.OpTimeout))
	if err != nil {
		f := transportFailure(err)
		return &f
	}
	if res.ExitCode != 0 {
		f := proc.Fail(proc.CodeCommandFailed, "signal %s exited %d: %s", sig, res.ExitCode, trim(string(res.Stderr)))
		return &f
	}
	return nil
}

func (r *opRun) restart() HostOpOutput {
	if cmd := r.spec.RestartCmd; cmd != "" || !hasAnyCommand(r.spec) {
		return r.startAndCheck("restart", commandFor(r.plat, "restart", r.spec))
	}
	// No restart_cmd: stop (if running), then start.
	if out, ran, restarted := r.stopKnown("stop", true); ran {
		if restarted || out.Result.Code != proc.CodeSuccess {
			return out
		}
		return r.startAndCheck("restart", commandFor(r.plat, "start", r.spec))
	}
	p, f := r.firstProbe()
	if f != nil {
		return failed(*f)
	}
	if p.alive {
		if out := r.stopAndCheck(p); out.Result.Code != proc.CodeSuccess {
			return out
		}
	}
	return r.startAndCheck("restart", commandFor(r.plat, "start", r.spec))
}

func (r *opRun) reload() HostOpOutput {
	cmd := commandFor(r.plat, "reload", r.spec)
	if cmd == "" {
		return failed(proc.Fail(proc.CodeBadSpec, "process %s has no reload_cmd", r.spec.ProcName))
	}
	before, f := r.probe(0, false)
	if f != nil {
		return failed(*f)
	}
	if !before.alive {
		return failed(proc.HostResult{Code: proc.CodeNotRunning, Message: proc.NotRunningMessage(r.spec.ProcName)})
	}
	f, first := r.controlThenCheck("reload", cmd, r.spec.StartCheck, false)
	if f != nil {
		return failed(*f)
	}
	if first == nil {
		if err := r.sleep(r.spec.StartCheck); err != nil {
			return failed(proc.Fail(proc.CodeTimeout, "post-check interrupted: %v", err))
		}
		p, f := r.probe(0, false)
		first = &checked{p: p, f: f}
	}
	after := first.p
	if first.f != nil {
		return failed(*first.f)
	}
	if !after.alive || after.sample.Pid != before.sample.Pid || !proc.SameIncarnation(after.sample, before.sample.StartTicks) {
		return observe(HostOpOutput{Result: proc.Fail(proc.CodePostCheck,
			"reload process (%s) failed, for post-check: pid %d was replaced or died", r.spec.ProcName, before.sample.Pid)}, after)
	}
	return observe(HostOpOutput{Result: ok()}, after)
}

func (r *opRun) kill() HostOpOutput {
	p, out := r.toEnd("kill")
	if out != nil {
		return *out
	}
	if cmd := commandFor(r.plat, "kill", r.spec); cmd != "" {
		return r.endByCommand("kill", cmd, p)
	}
	if f := r.signal(p, "KILL", 0); f != nil {
		return failed(*f)
	}
	return r.waitGone("kill", p, r.spec.StopCheck, nil)
}

func (r *opRun) sleep(d time.Duration) error {
	if r.a.Sleep != nil {
		return r.a.Sleep(r.ctx, d)
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return r.ctx.Err()
	case <-t.C:
		return nil
	}
}

// transportFailure maps a transport error to its per-host code, keeping 117
// for "could not reach the host at all".
func transportFailure(err error) proc.HostResult {
	var code proc.Code
	switch transport.KindOf(err) {
	case transport.KindAuth:
		code = proc.CodeAuthFailed
	case transport.KindHostKey:
		code = proc.CodeHostKey
	case transport.KindSudo:
		code = proc.CodeSudoRefused
	case transport.KindTimeout:
		code = proc.CodeTimeout
	case transport.KindUnsupported:
		code = proc.CodeBadSpec
	case transport.KindUnreachable:
		code = proc.CodeUnreachable
	default:
		if errors.Is(err, context.DeadlineExceeded) {
			code = proc.CodeTimeout
		} else {
			code = proc.CodeUnreachable
		}
	}
	// Transport errors may carry a host's stderr (sudo's, sshd's): one line.
	return proc.HostResult{Code: code, Message: trim(fmt.Sprintf("%s: %v", code.Message(), err))}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
