package policies

import (
	"fmt"

	"github.com/drover-sh/drover/proc"
)

// Desired states `starter ensure` converges a process to.
const (
	StateRunning = "running"
	StateStopped = "stopped"
	StateAbsent  = "absent"
)

// Observed is what a status op saw of a process on one host.
type Observed struct {
	Code    proc.Code // the status op's code: 0 running, 829 not running, 9106 not registered
	Message string
	Managed bool // the status content's isAuto
}

// EnsureStep is what a host needs to reach the desired state: nothing
// (already so), ops to run in order, or why it cannot be converged.
type EnsureStep struct {
	Ops  []proc.OpType
	Fail string
}

// Ensure decides, from one status observation, what brings a process to
// state; managed asks for it under supervision too (running only). A host
// whose status could not be read is not guessed at: it fails with why.
func Ensure(state string, managed bool, o Observed) EnsureStep {
	switch o.Code {
	case proc.CodeSuccess, proc.CodeNotRunning, proc.CodeNotRegistered:
	default:
		return EnsureStep{Fail: fmt.Sprintf("status answered %d: %s", int(o.Code), o.Message)}
	}
	running, registered := o.Code == proc.CodeSuccess, o.Code != proc.CodeNotRegistered
	switch state {
	case StateRunning:
		switch {
		case !registered:
			return EnsureStep{Fail: "process is not registered on this host; register it first (9106)"}
		case !running:
			return EnsureStep{Ops: []proc.OpType{proc.OpStart}} // a start also manages it
		case managed && !o.Managed:
			return EnsureStep{Ops: []proc.OpType{proc.OpRegister}}
		}
	case StateStopped:
		switch {
		case !registered:
			// Without a spec drover has no pid file to look at: it
			// cannot tell whether the process runs.
			return EnsureStep{Fail: "process is not registered on this host, so whether it runs is unknown (9106)"}
		case running:
			return EnsureStep{Ops: []proc.OpType{proc.OpStop}} // a stop also unmanages it
		case o.Managed:
			// Stopped but supervised: supervision would start it again.
			return EnsureStep{Ops: []proc.OpType{proc.OpUnregister}}
		}
	case StateAbsent:
		switch {
		case running:
			return EnsureStep{Ops: []proc.OpType{proc.OpStop, proc.OpSpecUnregister}}
		case registered:
			return EnsureStep{Ops: []proc.OpType{proc.OpSpecUnregister}}
		}
	}
	return EnsureStep{}
}

// ValidEnsure checks ensure's flags, naming the field and the rule.
func ValidEnsure(state string, managed bool) error {
	switch state {
	case StateRunning:
		return nil
	case StateStopped, StateAbsent:
		if managed {
			return fmt.Errorf("--managed: only with --state running (a %s process is never supervised)", state)
		}
		return nil
	}
	return fmt.Errorf("--state %q: must be running, stopped or absent", state)
}
