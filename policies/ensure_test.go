package policies

import (
	"fmt"
	"testing"

	"github.com/drover-sh/drover/proc"
)

func TestEnsure(t *testing.T) {
	run, notRun, unreg := proc.CodeSuccess, proc.CodeNotRunning, proc.CodeNotRegistered
	ops := func(o ...proc.OpType) []proc.OpType { return o }
	cases := []struct {
		state   string
		managed bool
		obs     Observed
		ops     []proc.OpType
		fails   bool
	}{
		{StateRunning, false, Observed{Code: run}, nil, false},
		{StateRunning, false, Observed{Code: run, Managed: true}, nil, false},
		{StateRunning, true, Observed{Code: run, Managed: true}, nil, false},
		{StateRunning, true, Observed{Code: run}, ops(proc.OpRegister), false},
		{StateRunning, false, Observed{Code: notRun}, ops(proc.OpStart), false},
		{StateRunning, true, Observed{Code: notRun}, ops(proc.OpStart), false},
		{StateRunning, false, Observed{Code: unreg}, nil, true},
		{StateStopped, false, Observed{Code: run}, ops(proc.OpStop), false},
		{StateStopped, false, Observed{Code: run, Managed: true}, ops(proc.OpStop), false},
		{StateStopped, false, Observed{Code: notRun}, nil, false},
		{StateStopped, false, Observed{Code: notRun, Managed: true}, ops(proc.OpUnregister), false},
		{StateStopped, false, Observed{Code: unreg}, nil, true},
		{StateAbsent, false, Observed{Code: run}, ops(proc.OpStop, proc.OpSpecUnregister), false},
		{StateAbsent, false, Observed{Code: notRun}, ops(proc.OpSpecUnregister), false},
		{StateAbsent, false, Observed{Code: notRun, Managed: true}, ops(proc.OpSpecUnregister), false},
		{StateAbsent, false, Observed{Code: unreg}, nil, false},
		// A status that could not be read is never guessed at.
		{StateRunning, false, Observed{Code: proc.CodeUnreachable, Message: "host unreachable"}, nil, true},
		{StateAbsent, false, Observed{Code: proc.CodeSudoRefused}, nil, true},
		{StateStopped, false, Observed{Code: proc.CodeTimeout}, nil, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s-managed=%v-%d-auto=%v", c.state, c.managed, c.obs.Code, c.obs.Managed), func(t *testing.T) {
			got := Ensure(c.state, c.managed, c.obs)
			if (got.Fail != "") != c.fails {
				t.Fatalf("fail %q, want failing=%v", got.Fail, c.fails)
			}
			if fmt.Sprint(got.Ops) != fmt.Sprint(c.ops) {
				t.Fatalf("ops %v, want %v", got.Ops, c.ops)
			}
		})
	}
}

func TestValidEnsure(t *testing.T) {
	for _, c := range []struct {
		state   string
		managed bool
		err     string
	}{
		{StateRunning, true, ""},
		{StateRunning, false, ""},
		{StateStopped, false, ""},
		{StateAbsent, false, ""},
		{StateStopped, true, "--managed: only with --state running (a stopped process is never supervised)"},
		{"up", false, `--state "up": must be running, stopped or absent`},
		{"", false, `--state "": must be running, stopped or absent`},
	} {
		err := ValidEnsure(c.state, c.managed)
		if got := fmt.Sprint(err); (err == nil && c.err != "") || (err != nil && got != c.err) {
			t.Fatalf("ValidEnsure(%q, %v) = %v, want %q", c.state, c.managed, err, c.err)
		}
	}
}
