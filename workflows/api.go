// Package workflows fans each op out over hosts and owns each host's process
// registry. It holds deterministic workflow code only; its decisions come
// from policies. The activities it schedules, by the names in protocol.go,
// live in activities and activities/dispatch; its client in internal/engine.
//
// Two kinds of workflow:
//   - Operate, one per request, ID = the GSE task id. It hands every item to
//     its host's workflow and collects the replies. Past ChunkSize items the
//     client splits the items into chunk Operate workflows it starts itself
//     (internal/engine; operate_split.go waits for them), so no workflow
//     holds, in its input, history or result, more than ChunkSize hosts'
//     worth. A task started directly with more items starts its chunks as
//     children (operate_chunks.go).
//   - Host, one per host, ID = host:<bk_cloud_id>:<ip>. It owns the host's
//     registry and runs the host's ops one at a time, so two ops on the same
//     process never interleave: they are serial by construction.
package workflows

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// WatchQueueSuffix names a task queue's watch queue by default.
const WatchQueueSuffix = "-watch"

// HostWorkflowID names a host's workflow.
func HostWorkflowID(h proc.HostID) string { return fmt.Sprintf("host:%d:%s", h.CloudID, h.IP) }

// ParseHostWorkflowID is the host a host workflow's id names.
func ParseHostWorkflowID(id string) (proc.HostID, bool) {
	rest, ok := strings.CutPrefix(id, "host:")
	if !ok {
		return proc.HostID{}, false
	}
	cloud, ip, ok := strings.Cut(rest, ":")
	n, err := strconv.Atoi(cloud)
	if !ok || err != nil {
		return proc.HostID{}, false
	}
	return proc.HostID{CloudID: n, IP: ip}, true
}

// RequestID names item index of task taskID: unique per item, so a request
// sent again runs once.
func RequestID(taskID string, index int) string { return fmt.Sprintf("%s#%d", taskID, index) }

// OperateInput is one request: an op over items. It never carries secrets.
type OperateInput struct {
	TaskID string      `json:"task_id"`
	Op     proc.OpType `json:"op_type"`
	Items  []proc.Item `json:"items"`
	// Manage marks processes managed when they are registered (seed 003).
	Manage bool `json:"manage,omitempty"`
	// Offset is the index of Items[0] in the whole task, for chunks.
	Offset int `json:"offset,omitempty"`
	// Indexed: the task was started with drover's search attributes, so
	// the workflow records its outcome in them too.
	Indexed bool `json:"indexed,omitempty"`
	// Files is a file op's files (references, never contents) and options.
	Files *proc.FileOp `json:"files,omitempty"`
	// Split is how many chunk workflows (<task id>/chunk-N) the client
	// started with the task's items, for a task of more than ChunkSize
	// items; the task itself then carries no items, only Total, so its
	// input stays the same size whatever the fleet's.
	Split int `json:"split,omitempty"`
	// Total is a split task's item count, on the task and on each of its
	// chunks (whose request deadlines allow for the whole task's delivery).
	Total int `json:"total,omitempty"`
}

// KeyedResult is one host's result under its result key, with the agent id
// the caller named the host by.
type KeyedResult = proc.KeyedResult

// OperateResult is the workflow's result and its progress query answer. A
// task split into chunks lists the chunk workflows instead of results.
type OperateResult struct {
	TaskID  string        `json:"task_id"`
	Done    int           `json:"done"`
	Total   int           `json:"total"`
	Results []KeyedResult `json:"results,omitempty"`
	Chunks  []string      `json:"chunks,omitempty"`
	// Failed counts the done items that did not succeed.
	Failed int `json:"failed,omitempty"`
}

// Counts is a task's progress in numbers (CountsQuery): what a progress
// bar needs, without any host's result.
type Counts struct {
	Total  int `json:"total"`
	Done   int `json:"done"`
	Failed int `json:"failed"`
	// Chunks are a task's chunks, each counted once finished; a caller
	// asks the unfinished ones for their own counts.
	Chunks []ChunkCounts `json:"chunks,omitempty"`
}

// ChunkCounts is one chunk workflow's counts.
type ChunkCounts struct {
	ID       string `json:"id"`
	Total    int    `json:"total"`
	Done     int    `json:"done"`
	Failed   int    `json:"failed"`
	Finished bool   `json:"finished,omitempty"`
	// Error says why a chunk that failed as a whole did.
	Error string `json:"error,omitempty"`
}

// HostRequest asks a host's workflow to run one op on one process.
type HostRequest struct {
	// RequestID is unique per task item, so a re-sent request runs once:
	// "<task id>#<index>".
	RequestID string `json:"request_id"`
	// TaskID is the task the request is an item of; empty for
	// supervision's own ops, and in requests sent before it was a field,
	// whose task is read from RequestID (taskOf).
	TaskID  string         `json:"task_id,omitempty"`
	ReplyTo string         `json:"reply_to"`
	Index   int            `json:"index"`
	Op      proc.OpType    `json:"op_type"`
	Target  proc.Target    `json:"target"`
	Process proc.ProcessID `json:"process"`
	Spec    *proc.Spec     `json:"spec,omitempty"`
	Manage  bool           `json:"manage,omitempty"`
	// Supervision carries the worker's supervision settings to the host.
	Supervision *Supervision `json:"supervision,omitempty"`
	// Files is a file op's files and options; nil for every other op.
	Files *proc.FileOp `json:"files,omitempty"`
	// Deadline is the latest time the host may start the op
	// (policies.Deadlines); dequeued later, it is not run and answers
	// 9105. Zero for requests from before deadlines, and supervision's own.
	Deadline time.Time `json:"deadline,omitempty"`
}

// Supervision settings a host workflow polls with.
type Supervision struct {
	Interval   time.Duration `json:"interval"`
	LimitPolls int           `json:"limit_polls"`
	// TimeZone is the zone crontab rules are read in: an IANA name, UTC
	// or a fixed offset (+08:00); empty means each host's own.
	TimeZone string `json:"time_zone,omitempty"`
	// WatchQueue is the task queue watches run on, apart from the ops';
	// empty means the host workflow's own queue + "-watch".
	WatchQueue string `json:"watch_queue,omitempty"`
	// WatchShards is how many shard watches supervise the fleet, a host
	// going to one by the hash of its id; 0 watches each host with a
	// watch of its own, as releases before shards did.
	WatchShards int `json:"watch_shards,omitempty"`
	// Off: the worker does not supervise (config no_supervision); hosts
	// keep their registries and run ops, and start no watch. Each watch
	// is one long activity, so a worker supervising N hosts needs N
	// activity slots and carries N heartbeats.
	Off bool `json:"off,omitempty"`
}

// HostReply is a host's answer to one HostRequest.
type HostReply struct {
	Index  int             `json:"index"`
	Result proc.HostResult `json:"result"`
}

// Entry is one registered process on a host.
type Entry struct {
	Process proc.ProcessID `json:"process"`
	Spec    proc.Spec      `json:"spec"`
	// SupplierID is the bk_supplier_id the process was registered with,
	// for its result key.
	SupplierID int `json:"bk_supplier_id,omitempty"`
	proc.Registration
	// StartTicks and Pid identify the incarnation drover last started or
	// saw, so a reused pid is never taken for it.
	StartTicks uint64 `json:"start_ticks,omitempty"`
	Pid        int    `json:"pid,omitempty"`
	// Seen is the process as the last op or supervision saw it.
	Seen *Sighting `json:"seen,omitempty"`

	// Supervision state.
	Restart policies.RestartState `json:"restart"`
	RetryAt time.Time             `json:"retry_at,omitempty"` // a restart waiting out its backoff
	// RetryStop: the restart must stop the process first (it is alive,
	// but unhealthy).
	RetryStop bool      `json:"retry_stop,omitempty"`
	Cancelled bool      `json:"cancelled,omitempty"` // gave up after start_retries
	LastRun   time.Time `json:"last_run,omitempty"`  // periodic: the last scheduled run
	NextRun   time.Time `json:"next_run,omitempty"`  // periodic: the next one
}

// Event is something supervision did or saw, as the GSE agent reports it.
type Event struct {
	Time    time.Time      `json:"time"`
	Host    proc.HostID    `json:"host"`
	Process proc.ProcessID `json:"process"`
	Kind    string         `json:"kind"`
	Detail  string         `json:"detail"`
	Pid     int            `json:"pid,omitempty"`
	// Scheduled is the time a periodic run was scheduled for.
	Scheduled time.Time `json:"scheduled,omitempty"`
}

// Event kinds; the first four are the GSE agent's.
const (
	EventRestartSuccess = "process_restart_success"
	EventRestartFailed  = "process_restart_failed"
	EventCancelRestart  = "process_cancel_restart"
	EventLimitExceed    = "process_resource_limit_exceed"
	EventConfigDrift    = "process_config_drift"
	EventConfigRestored = "process_config_restored"
	EventPeriodicRun    = "process_periodic_run"
	EventPeriodicSkip   = "process_periodic_skip"
	EventPeriodicFailed = "process_periodic_failed"
	EventWatchFailed    = "host_watch_failed"
	// EventFoundRunning: supervision was about to start a process it had
	// seen dead, and found it running again (started by something else).
	EventFoundRunning = "process_found_running"
	// EventRestartDelayed: a crash-looping process waits before its next
	// start.
	EventRestartDelayed = "process_restart_delayed"
)

// SupervisionEventsMetric counts supervision events on the worker's metrics,
// tagged event=<kind>: restarts are event="process_restart_success".
const SupervisionEventsMetric = "drover_supervision_events"

// HostState is a host workflow's whole state; it is also the input of
// its continue-as-new.
type HostState struct {
	Host    proc.HostID   `json:"host"`
	Entries []Entry       `json:"entries"`
	Queue   []HostRequest `json:"queue,omitempty"`
	// Seen holds recent request ids, oldest first, to drop re-sent requests.
	Seen        []string    `json:"seen,omitempty"`
	Events      []Event     `json:"events,omitempty"`
	Supervision Supervision `json:"supervision"`
	// CancelledTasks are recently cancelled task ids, oldest first: a
	// request of one that arrives after the cancel is not run.
	CancelledTasks []string `json:"cancelled_tasks,omitempty"`
	// Zone is the zone crontab rules are read in, as the watch last
	// learned it.
	Zone policies.Zone `json:"zone,omitempty"`
	// WatchGen is the generation of the host's latest watch armed on a
	// shard: events of any other are stale. WatchShard is the shard it is
	// armed on, empty when none.
	WatchGen   int    `json:"watch_gen,omitempty"`
	WatchShard string `json:"watch_shard,omitempty"`
	// Answers are the latest answers to requests sent by update, for one
	// sent again after the run that took it ended.
	Answers []Answer `json:"answers,omitempty"`
	// Born is the ledger's newest change (LedgerGen) on the worker that
	// began the run; 0 for runs begun before it was kept.
	Born int `json:"born,omitempty"`
}

// NewHostState is the input of a host's first run.
func NewHostState(h proc.HostID, s Supervision) HostState {
	return HostState{Host: h, Supervision: s, Born: LedgerGen}
}
