package transport

import (
	"slices"
	"testing"
)

// TestSimStepsCutsAtOperatorsOnly: a redirection's & is not an operator.
func TestSimStepsCutsAtOperatorsOnly(t *testing.T) {
	for _, tc := range []struct {
		line       string
		steps, ops []string
	}{
		{"setsid ./svc 86400 </dev/null >/dev/null 2>&1 & echo $! > svc.pid",
			[]string{"setsid ./svc 86400 </dev/null >/dev/null 2>&1", "echo $! > svc.pid"}, []string{"&", ""}},
		{"kill $(cat svc.pid) && rm -f svc.pid", []string{"kill $(cat svc.pid)", "rm -f svc.pid"}, []string{"&&", ""}},
		{"./start.sh; ./check.sh &", []string{"./start.sh", "./check.sh", ""}, []string{";", "&", ""}},
		{"./run >&2", []string{"./run >&2"}, []string{""}},
	} {
		steps, ops := simSteps(tc.line)
		if !slices.Equal(steps, tc.steps) || !slices.Equal(ops, tc.ops) {
			t.Errorf("simSteps(%q) = %q %q, want %q %q", tc.line, steps, ops, tc.steps, tc.ops)
		}
	}
}
