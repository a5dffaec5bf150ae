// Package activities is what happens on one host: probing processes and
// running their control commands. Activities return small summaries, never
// raw logs, and resolve credentials themselves so none enter workflow inputs.
package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// HostOpInput asks for one op on one process on one host.
type HostOpInput struct {
	TaskID  string
	Op      proc.OpType
	Target  proc.Target
	Process proc.ProcessID
	Spec    proc.Spec
}

// Activities holds what host activities need; methods are registered with
// the worker.
type Activities struct {
	Inventory *inventory.Inventory
	Runner    transport.Runner
}

// HostOp runs one op on one host. Per-host failures come back as result
// codes, not errors: one host's trouble must never fail the workflow.
func (a *Activities) HostOp(ctx context.Context, in HostOpInput) (proc.HostResult, error) {
	host, ok := a.Inventory.Lookup(in.Target.HostID())
	if !ok {
		return proc.Fail(proc.CodeUnknownHost, "host bk_cloud_id=%d ip=%s is not in the inventory", in.Target.CloudID, in.Target.IP), nil
	}
	spec := policies.WithDefaults(in.Spec)
	defer keepAlive(ctx)()
	switch in.Op {
	case proc.OpStatus:
		return a.status(ctx, host, in.Target, spec)
	}
	if !in.Op.Valid() {
		return proc.Fail(proc.CodeBadOpType, "op_type %d is not one of 0,1,2,3,4,7,8,9", int(in.Op)), nil
	}
	return proc.Fail(proc.CodeBadOpType, "op_type %d (%s) is not supported yet", int(in.Op), in.Op), nil
}

func (a *Activities) status(ctx context.Context, host inventory.Host, t proc.Target, spec proc.Spec) (proc.HostResult, error) {
	script := ProbeScript([]string{spec.PidPath}, policies.StatusCPUWindow)
	res, err := a.Runner.Run(ctx, host, transport.Command{Script: script, Account: spec.Account, Timeout: spec.OpTimeout})
	if err != nil {
		return transportFailure(err), nil
	}
	if res.ExitCode != 0 {
		return proc.Fail(proc.CodeCommandFailed, "status probe exited %d: %s", res.ExitCode, trimOutput(res.Stderr)), nil
	}
	info, samples, err := ParseProbe(string(res.Stdout), 1)
	if err != nil {
		return proc.Fail(proc.CodeInternal, "%v", err), nil
	}
	if info.User != spec.Account {
		// Never report what another account saw as this account's view.
		return proc.Fail(proc.CodeSudoRefused, "probe ran as %q, not as account %q", info.User, spec.Account), nil
	}
	sample := samples[0]
	alive := proc.Alive(sample, spec.ProcName)
	content := proc.EncodeContent(proc.BuildStatus(t.IP, spec, info, sample, alive, proc.Registration{}, proc.StatusExtras{}))
	if !alive {
		return proc.HostResult{Code: proc.CodeNotRunning, Message: proc.NotRunningMessage(spec.ProcName), Content: content}, nil
	}
	return proc.HostResult{Code: proc.CodeSuccess, Message: proc.CodeSuccess.Message(), Content: content}, nil
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
	return proc.HostResult{Code: code, Message: fmt.Sprintf("%s: %v", code.Message(), err)}
}

// trimOutput keeps error messages short: callers show them in tables.
func trimOutput(b []byte) string {
	const max = 1024
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}
