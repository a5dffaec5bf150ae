package workflows

import (
	"testing"

	"github.com/drover-sh/drover/proc"
)

// TestFailedIsCountedOneWay: a task's progress counts, its result's failed
// count and the outcome its search attributes record agree; a host still
// pending (115) is not counted failed by any of them.
func TestFailedIsCountedOneWay(t *testing.T) {
	op := &operation{in: OperateInput{TaskID: "T", Items: make([]proc.Item, 3)},
		results: []proc.HostResult{{Code: proc.CodeSuccess}, proc.Pending(), {Code: proc.CodeNotRunning}}}
	outcome, failed := outcomeOf(op.results)
	if c, s := op.counts(), op.snapshot(); c.Failed != 1 || s.Failed != 1 || failed != 1 || outcome != OutcomeFailed {
		t.Fatalf("counts %d, result %d, search attribute %d (%s); want 1 everywhere", c.Failed, s.Failed, failed, outcome)
	}
	if outcome, failed := outcomeOf([]proc.HostResult{{Code: proc.CodeSuccess}, proc.Pending()}); outcome != OutcomeOK || failed != 0 {
		t.Fatalf("a pending host: outcome %s with %d failed, want ok and 0", outcome, failed)
	}
}
