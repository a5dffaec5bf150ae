package e2e

import (
	"strings"
	"syscall"
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

// TestStatusBatchOfALostWorkerIsRetried: the worker running a status batch
// is SIGKILLed mid-batch (one host's probe hangs on a FIFO pid file, so the
// batch is still running). The server gives the batch up when its
// heartbeats stop, another worker probes it again, and every host answers
// for itself: the others running, the hung one its own 9105. No host
// answers for the batch (9199 "context canceled", or 9105 "did not
// answer").
func TestStatusBatchOfALostWorkerIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	ids := e.fleet(t, 4, "0.2")
	e.registerFleet(t, ids, func(s *proc.Spec) { s.OpTimeout, s.AutoType = 10*time.Minute, proc.AutoOneShot })
	checkStartedOnce(t, ids, e.waitOp(t, e.startOp(t, proc.OpStart, ids), time.Minute), 1)
	// Unmanaged, so only the status probe reads the pid files.
	for ip, r := range e.waitOp(t, e.startOp(t, proc.OpUnregister, ids), time.Minute) {
		wantCode(t, "unmanage "+ip, r, proc.CodeSuccess)
	}
	victim := ids[0]
	if _, err := victim.host.Exec("rm -f " + victim.pidPath() + " && mkfifo " + victim.pidPath()); err != nil {
		t.Fatal(err)
	}
	e.worker.Stop()
	first := e.startWorkerProcess(t)
	task := e.startOp(t, proc.OpStatus, ids)
	waitFor(t, time.Minute, "the batch probing the hung host", func() bool {
		out, _ := victim.host.Exec("pgrep -f '/data/" + victim.dir + "/sv[c].pid' | wc -l")
		return strings.TrimSpace(out) != "0"
	})
	if err := syscall.Kill(-first.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = first.Process.Wait()
	e.startWorkerProcess(t)
	res := e.waitOp(t, task, 5*time.Minute)
	// Its own: its probe's command ran past the probe's bound. Not the
	// batch's: "did not answer", "deadline passed", "context canceled".
	if r := res[victim.ip]; r.Code != proc.CodeTimeout || !strings.Contains(r.Message, "ran past its") {
		t.Errorf("hung host: %d %q, want its own probe's 9105", r.Code, r.Message)
	}
	for _, id := range ids[1:] {
		if r := res[id.ip]; r.Code != proc.CodeSuccess {
			t.Errorf("%s: %d %q, want its own answer", id.ip, r.Code, r.Message)
		}
	}
}
