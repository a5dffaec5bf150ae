package e2e

import (
	"testing"
	"time"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// TestStatusHungHostFailsAlone: a process whose op_timeout is longer than
// a status batch's deadline, on a host where its probe hangs: the pid file
// is a FIFO nobody writes, as a pid file on a hung network mount behaves.
// The probe is bounded by policies.StatusProbeMax, so that host answers
// 9105 alone within the bound and the rest of its batch answers as usual;
// were the probe allowed its op_timeout, the batch would pass its deadline
// and every host in it would fail.
func TestStatusHungHostFailsAlone(t *testing.T) {
	e := newEnv(t, 3)
	ids := e.fleet(t, 3, "0.2")
	// One-shot: supervision must not start the victim again when a poll
	// misses its pid file, or that start's own probe would wait on the FIFO
	// for its 10 minutes and hold the worker's stop at the end.
	e.registerFleet(t, ids, func(s *proc.Spec) { s.OpTimeout, s.AutoType = 10*time.Minute, proc.AutoOneShot })
	checkStartedOnce(t, ids, e.waitOp(t, e.startOp(t, proc.OpStart, ids), time.Minute), 1)
	victim := ids[0]
	if _, err := victim.host.Exec("rm -f " + victim.pidPath() + " && mkfifo " + victim.pidPath()); err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	res := e.waitOp(t, e.startOp(t, proc.OpStatus, ids), 3*policies.StatusBatchDeadline)
	took := time.Since(began)
	r := res[victim.ip]
	if r.Code != proc.CodeTimeout || r.Message == "" {
		t.Errorf("hung probe: %d (%s), want %d with a message", r.Code, r.Message, proc.CodeTimeout)
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
