package e2e

import (
	"testing"
	"time"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// TestStatusHungHostFailsAlone: a process whose op_timeout is longer than
// a status batch's deadline, on a host that hangs. Its probe is bounded by
// policies.StatusProbeMax, so the hung host answers alone within that
// bound and the rest of its batch answers as usual; were the probe allowed
// its op_timeout, the batch would pass its deadline and every host in it
// would fail.
func TestStatusHungHostFailsAlone(t *testing.T) {
	e := newEnv(t, 3)
	ids := e.fleet(t, 3, "0.2")
	e.registerFleet(t, ids, func(s *proc.Spec) { s.OpTimeout = 10 * time.Minute })
	checkStartedOnce(t, ids, e.waitOp(t, e.startOp(t, proc.OpStart, ids), time.Minute), 1)
	victim := ids[0]
	if err := victim.host.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.host.Resume() })

	began := time.Now()
	res := e.waitOp(t, e.startOp(t, proc.OpStatus, ids), 3*policies.StatusBatchDeadline)
	took := time.Since(began)
	r := res[victim.ip]
	if r.Code != proc.CodeTimeout && r.Code != proc.CodeUnreachable || r.Message == "" {
		t.Errorf("hung host: %d (%s), want %d or %d with a message", r.Code, r.Message, proc.CodeTimeout, proc.CodeUnreachable)
	}
	for _, id := range ids[1:] {
		if res[id.ip].Code != proc.CodeSuccess {
			t.Errorf("status of %s beside the hung host: %+v", id.ip, res[id.ip])
		}
	}
	if took >= policies.StatusBatchDeadline {
		t.Errorf("status over a hung host took %s, past the batch deadline %s", took, policies.StatusBatchDeadline)
	}
	t.Logf("status with one hung host (op_timeout 10m): %s; hung host %d %q", took.Round(time.Millisecond), r.Code, r.Message)
}
