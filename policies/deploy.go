package policies

import (
	"time"

	"github.com/drover-sh/drover/proc"
)

// WorkerStopMargin is the time a stopping worker allows past the longest
// op's deadline, to report that op's result to the server.
const WorkerStopMargin = 30 * time.Second

// WorkerStopTimeout is how long a stopping worker (SIGTERM, a deploy) lets
// the host ops it runs go on before their commands are cancelled: the
// deadline of the longest op the given bounds allow (a restart with the
// largest op_timeout and check windows), plus WorkerStopMargin. Every op
// ends by its own deadline anyway, so the stop waits only as long as the
// ops actually running: a command is never killed because the worker is
// stopping. Supervision watches return at once on a stop and are taken up
// by the next worker.
func WorkerStopTimeout(maxOpTimeout, maxCheck time.Duration) time.Duration {
	longest := proc.Spec{OpTimeout: maxOpTimeout, StartCheck: maxCheck, StopCheck: maxCheck}
	d := WorkerStopMargin
	for _, op := range []proc.OpType{proc.OpStart, proc.OpStop, proc.OpRestart, proc.OpReload, proc.OpKill} {
		d = max(d, HostOpDeadline(op, WithDefaults(longest))+WorkerStopMargin)
	}
	return max(d, StatusBatchDeadline+WorkerStopMargin)
}
