// Package policies holds drover's pure decisions: defaults, timeouts and
// limits. Nothing here does I/O or reads the clock, so tests drive it directly.
package policies

import (
	"time"

	"github.com/drover-sh/drover/proc"
)

// Defaults the GSE agent documents; a caller's zero means "use these".
const (
	DefaultStartCheck    = 5 * time.Second
	DefaultStopCheck     = 5 * time.Second
	DefaultOpTimeout     = 60 * time.Second
	DefaultStartRetries  = 4
	DefaultStartInterval = 10 * time.Second
	DefaultAccount       = "root"

	// StatusCPUWindow is how long a status probe samples CPU ticks.
	StatusCPUWindow = 200 * time.Millisecond

	// MaxInFlight caps the activities one workflow keeps pending, well
	// under the server's per-workflow pending-activity limit.
	MaxInFlight = 500
)

// WithDefaults fills every zero a caller may send with the documented default.
func WithDefaults(s proc.Spec) proc.Spec {
	if s.StartCheck <= 0 {
		s.StartCheck = DefaultStartCheck
	}
	if s.StopCheck <= 0 {
		s.StopCheck = DefaultStopCheck
	}
	if s.OpTimeout <= 0 {
		s.OpTimeout = DefaultOpTimeout
	}
	if s.StartRetries <= 0 {
		s.StartRetries = DefaultStartRetries
	}
	if s.StartInterval <= 0 {
		s.StartInterval = DefaultStartInterval
	}
	if s.Account == "" {
		s.Account = DefaultAccount
	}
	if s.ShellExt == "" {
		s.ShellExt = proc.ShellSh
	}
	return s
}

// HostOpDeadline bounds one op on one host end to end: the control command
// (op_timeout), the post-check wait, and a margin for connecting and probing.
// The workflow uses it as the activity's StartToClose, so a hung host ends
// with its own code instead of stalling the batch.
func HostOpDeadline(op proc.OpType, s proc.Spec) time.Duration {
	const margin = 15 * time.Second
	d := s.OpTimeout + margin
	switch op {
	case proc.OpStart, proc.OpReload:
		d += s.StartCheck
	case proc.OpStop, proc.OpKill:
		d += s.StopCheck
	case proc.OpRestart:
		d += s.OpTimeout + s.StartCheck + s.StopCheck
	}
	return d
}

// LocalOpBudget is how long a task's op may run as a local activity, in
// its host workflow's task: the SDK heartbeats a workflow task at 0.8 of
// its 10 s timeout, and an op done within this finishes in one task, with
// room left for a slow worker. A longer op goes on as an activity.
const LocalOpBudget = 6 * time.Second

// HeartbeatTimeout lets a lost worker's activity be retried elsewhere soon,
// instead of after its full StartToClose.
const HeartbeatTimeout = 10 * time.Second

// ChunkSize is the most items one Operate workflow handles itself; larger
// tasks split into child workflows of this size. It keeps each history far
// from the server's event and size limits.
const ChunkSize = 500

// TaskBackstop bounds how long an Operate workflow waits for a host's reply
// when the host side never answers (its own deadlines normally end it).
const TaskBackstop = 2 * time.Hour

// StartCheckSpan says how long a start was watched, for messages.
func StartCheckSpan(s proc.Spec) time.Duration {
	if s.StartCheckEnd > s.StartCheck {
		return s.StartCheckEnd
	}
	return s.StartCheck
}

// StatusBatch is how many hosts one status activity probes. It is large
// because the engine's cost is per activity, not per host, and small enough
// that a batch lost with its worker is cheap to probe again.
const StatusBatch = 100

// StatusProbeMax bounds one status probe whatever the spec's op_timeout: a
// probe only reads /proc, and its batch's deadline is fixed, so a probe
// allowed to run until a long op_timeout would let one hung host time out
// the whole batch (and every host in it) instead of failing alone.
const StatusProbeMax = 30 * time.Second

// StatusProbeTimeout is how long a status probe of a process with
// op_timeout may run: op_timeout, at most StatusProbeMax.
func StatusProbeTimeout(opTimeout time.Duration) time.Duration {
	if opTimeout <= 0 || opTimeout > StatusProbeMax {
		return StatusProbeMax
	}
	return opTimeout
}

// StatusBatchDeadline is the time a status task gives its last batch: its
// registry reads, then probes in parallel, each bounded by
// StatusProbeTimeout, with room for a slow registry read before them.
const StatusBatchDeadline = DefaultOpTimeout + 30*time.Second

// BatchHeartbeatTimeout is the heartbeat timeout of an activity that works
// on a batch of hosts (status probes, deliveries). A batch only reads or
// waits on hosts, which run their ops whatever becomes of it, so one given
// up is tried again at no risk, and a loaded server that answers heartbeats
// late must not give up batches that work. With HeartbeatThrottleMax the
// server has six heartbeats to record in it; at 1 minute, with the SDK's
// default of one a minute at most, a 10,000-host start had 174 of its 200
// batches given up, and a status one in five, each probed again in full.
// A batch lost with its worker is tried again after it.
const BatchHeartbeatTimeout = 2 * time.Minute

// HeartbeatThrottleMax is the most time the worker lets pass between the
// heartbeats it sends of one activity (the SDK's default is 60 s). A
// loaded server times some of them out: at one a minute, losing one left
// a batch's next heartbeat racing its timeout, and at 10,000 hosts 131
// batches of a start were given up while they worked.
const HeartbeatThrottleMax = 20 * time.Second

// StickyScheduleToStart is how long a workflow task waits for the worker
// that last ran its workflow before any worker of its queue may take it
// (the SDK's default is 5 s). A worker sharing its cores with thousands
// of host ops takes longer than 5 s, and a task moved on then waited a
// minute more: a worker with a fixed number of pollers polls only its own
// queue while that last reported a backlog, until a poll comes back empty
// (at 10,000 identities the last 38 hosts of a start and of a restart
// answered 60 s after all others). A worker that stops hands its tasks
// back at once; one that crashed holds a task it had not started this long.
const StickyScheduleToStart = 30 * time.Second

// QueryBudget bounds a query whose caller set no deadline. The server
// holds a query while its workflow has a task pending, and a task on the
// sticky queue of a worker that died waits StickyScheduleToStart.
const QueryBudget = StickyScheduleToStart + 30*time.Second

// WorkflowDeadlockTimeout is how long workflow code may run without
// yielding before the SDK fails its task as deadlocked (the SDK's default
// is 1 s). It is wall time: a chunk's task on a worker that shares two
// cores with its hosts overran 1 s without any deadlock, and failing it
// only ran it again.
const WorkflowDeadlockTimeout = 5 * time.Second

// StatusTaskDeadline bounds how long a status task of n items keeps
// trying its batches: the time a request may take to reach its host
// (DeliveryAllowance and DeliveryPerHundred, as for any task), then one
// batch's bound.
func StatusTaskDeadline(n int) time.Duration {
	return DeliveryAllowance + DeliveryExtra(n) + StatusBatchDeadline
}

// Supervision defaults.
const (
	// DefaultPollInterval is how often supervision samples a host.
	DefaultPollInterval = 10 * time.Second
	// WatchRenew ends a quiet watch activity now and then; each renewal
	// costs the host workflow a handful of history events.
	WatchRenew = time.Hour
)

// RegistryQueryTimeout bounds one try of a host workflow's registry query,
// and RegistryReadBudget the tries. A query to a workflow whose last
// worker is gone first waits on that worker's sticky queue; the server
// then resets stickiness, so another try reaches a live worker at once.
// The budget leaves a status batch (StatusBatchDeadline) room for its
// probes (StatusProbeMax) after it.
const (
	RegistryQueryTimeout = 10 * time.Second
	RegistryReadBudget   = StatusBatchDeadline - StatusProbeMax - 10*time.Second
)

// WatchPollTimeout bounds one supervision poll's exec; a hung host's poll
// ends here and the watch polls again.
const WatchPollTimeout = 30 * time.Second

// WatchScheduleToStart bounds how long a watch may wait for a worker to
// take it up: past it, the host records that its supervision is paused
// (no worker has a free watch slot) and tries again after
// WatchFailureBackoff.
const WatchScheduleToStart = 5 * time.Minute

// WatchHeartbeatTimeout is a watch's heartbeat timeout: a watch lost with
// its worker is taken up by another within it. The SDK sends a watch's
// heartbeat every 0.8 of it (40 s), which is most of what quiet
// supervision costs the server: 25 requests/s per 1,000 hosts. It is
// sized so a process killed after its worker's loss is running again
// within supervise_interval + start_check + 60 s.
const WatchHeartbeatTimeout = 50 * time.Second

// HealthCheckTimeout bounds one health_cmd in a supervision poll. Checks
// run side by side, so a poll takes as long as its slowest check, well
// inside WatchPollTimeout, however many processes a host has.
const HealthCheckTimeout = 10 * time.Second

// WatchFailureBackoff pauses supervision of a host whose watch failed
// outright (not merely unreachable), instead of retrying in a tight loop.
const WatchFailureBackoff = time.Minute

// MaxCatchUp is how many periodic runs that fell due during an outage are
// still run when it ends; older ones are skipped, and recorded as such.
const MaxCatchUp = 3

// ShardHeartbeatTimeout is a shard watch's heartbeat timeout. The SDK
// sends one heartbeat every 0.8 of it (24 s) per shard, not per host: at
// 250 hosts a shard, 1,000 quiet hosts cost the server 4 heartbeats in
// 24 s. A shard lost with its worker is taken up by another within it,
// so a process killed after the loss runs again well inside
// supervise_interval + start_check + 60 s, its host workflows' queries
// included.
const ShardHeartbeatTimeout = 30 * time.Second

// ShardRestartDebounce is the least time between two starts of a shard's
// watch when its membership changes: hosts re-arming after a mass
// failure join the next start together instead of each restarting it.
const ShardRestartDebounce = 5 * time.Second

// HostsPerShard is what watch_shards is sized by: one shard watch per
// this many supervised hosts.
const HostsPerShard = 250

// A task hands its items to their hosts in batches, one activity each
// (workflows' Deliver), by update.
const (
	// DeliverBatch is about how many items one batch holds: all of a
	// host's items go in one batch, so a batch may hold more.
	DeliverBatch = 50
	// DeliverParallel bounds the hosts one batch works on at once, and
	// DeliverInFlight the updates one worker has in flight.
	DeliverParallel = 256
	DeliverInFlight = 1000
	// DeliverRetryFirst and DeliverRetryMax space the tries of one update
	// the engine did not take.
	DeliverRetryFirst = 200 * time.Millisecond
	DeliverRetryMax   = 5 * time.Second
	// DeliverReportEvery spaces the signals that carry a batch's answers
	// to its task as they come: each wakes the task, so they are few,
	// and a task's progress is per host, not per batch. A chunk has ten
	// batches: at 1 s its workflow took ten signals a second, each a
	// workflow task, and at 10,000 hosts the server, busy with that one
	// workflow, timed out the batches' heartbeats and completions; at
	// 5 s it still did.
	DeliverReportEvery = 10 * time.Second
	// DeliverGrace is how long past a request's deadline the engine is
	// still tried; the host refuses it as too late anyway.
	DeliverGrace = time.Minute
)

// TasksQueue names the queue of the tasks (Operate workflows, their chunks
// and their batches) of workers that poll queue: a worker polls both.
func TasksQueue(queue string) string { return queue + "-tasks" }
