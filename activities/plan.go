package activities

import (
	"fmt"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// PlanStep is one thing an op would do on a host: a label and its detail,
// the exact command line where it runs one.
type PlanStep struct {
	What   string `json:"what"`
	Detail string `json:"detail"`
}

// HostPlan is what an op would do on one host, built from the same
// defaults, command choices and quoting HostOp uses, without touching the
// host.
type HostPlan struct {
	// RunsAs says which account runs the commands, and how drover becomes it.
	RunsAs string     `json:"runs_as"`
	Steps  []PlanStep `json:"steps"`
	// Refused is why the op would fail before running any command, or "".
	Refused string `json:"refused,omitempty"`
}

// Plan describes op on spec (as registered, defaults not yet applied) on
// host. It runs nothing.
func Plan(host inventory.Host, op proc.OpType, spec proc.Spec) HostPlan {
	spec = policies.WithDefaults(spec)
	plat := platformFor(host)
	p := HostPlan{RunsAs: runsAs(host, plat, spec)}
	switch {
	case op.IsSpecOp():
		p.RunsAs = "no command runs on the host"
		return p
	case op == proc.OpRegister:
		p.RunsAs, p.Steps = "no command runs on the host", []PlanStep{{"manage", "put the process under supervision"}}
		return p
	case op == proc.OpUnregister:
		p.RunsAs, p.Steps = "no command runs on the host", []PlanStep{{"unmanage", "take the process out of supervision"}}
		return p
	}
	if why := plat.fits(spec); why != "" {
		p.Refused = fmt.Sprintf("%s; %s is reached over %s", why, host.IP, host.Transport)
		return p
	}
	probe := PlanStep{"probe", "pid file " + spec.PidPath}
	if spec.PidPath == "" {
		probe.Detail = "process " + spec.ProcName + " (no pid_file)"
	}
	startCheck := PlanStep{"check", fmt.Sprintf("alive %s after the command", policies.StartCheckSpan(spec))}
	stopCheck := PlanStep{"check", fmt.Sprintf("gone within stop_check %s", spec.StopCheck)}
	run := func(verb string) PlanStep { return PlanStep{"run", commandFor(plat, verb, spec)} }
	// ends is stop or kill: its command, else a signal to the group.
	ends := func(verb, sig string) []PlanStep {
		if c := commandFor(plat, verb, spec); c != "" {
			return []PlanStep{{"run", c}, stopCheck}
		}
		detail := fmt.Sprintf("%s to the process group of the probed pid", sig)
		if sig == "TERM" {
			detail += fmt.Sprintf(", KILL after stop_check %s", spec.StopCheck)
		}
		return []PlanStep{{"signal", detail}, stopCheck}
	}
	switch op {
	case proc.OpStatus:
		p.Steps = []PlanStep{probe}
	case proc.OpStart:
		p.Steps = []PlanStep{probe, run("start"), startCheck}
	case proc.OpStop:
		p.Steps = append([]PlanStep{probe}, ends("stop", "TERM")...)
	case proc.OpKill:
		p.Steps = append([]PlanStep{probe}, ends("kill", "KILL")...)
	case proc.OpRestart:
		if spec.RestartCmd != "" || !hasAnyCommand(spec) {
			p.Steps = []PlanStep{probe, run("restart"), startCheck}
			break
		}
		p.Steps = append(append([]PlanStep{probe}, ends("stop", "TERM")...), run("start"), startCheck)
	case proc.OpReload:
		if commandFor(plat, "reload", spec) == "" {
			p.Refused = fmt.Sprintf("process %s has no reload_cmd", spec.ProcName)
			return p
		}
		p.Steps = []PlanStep{probe, run("reload"), {"check", fmt.Sprintf("same pid %s after the command", spec.StartCheck)}}
	default:
		p.Refused = fmt.Sprintf("op_type %d has no host action", int(op))
	}
	return p
}

// runsAs names the account and the switch to it, as the transport makes it.
func runsAs(host inventory.Host, plat platform, spec proc.Spec) string {
	acct := plat.account(spec)
	if host.Transport == inventory.TransportWinRM {
		if acct == "" {
			return fmt.Sprintf("%s (the winrm login)", host.User)
		}
		return fmt.Sprintf("%s (winrm login %s)", acct, host.User)
	}
	if prefix := transport.AccountPrefix(host.User, acct); prefix != "" {
		return fmt.Sprintf("%s (ssh login %s, then %s)", acct, host.User, prefix+"sh -c COMMAND")
	}
	return fmt.Sprintf("%s (ssh login %s, no sudo)", acct, host.User)
}
