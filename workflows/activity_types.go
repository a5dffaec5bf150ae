package workflows

import (
	"time"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/proc"
)

// The inputs and outputs of the activities workflows schedule by name
// (protocol.go) and dispatch.Dispatcher runs. Histories hold them encoded:
// a field is never renamed or given another meaning.

// DeliverInput is one batch of a task's items, each host's items all in
// the one batch, to hand to their hosts by update.
type DeliverInput struct {
	TaskID string      `json:"task_id"`
	Op     proc.OpType `json:"op_type"`
	Manage bool        `json:"manage,omitempty"`
	Items  []proc.Item `json:"items"`
	// Indexes are the items' places in the whole task; Deadlines the
	// latest time each may start on its host (policies.TaskDeadlines).
	Indexes   []int        `json:"indexes"`
	Deadlines []time.Time  `json:"deadlines"`
	Files     *proc.FileOp `json:"files,omitempty"`
}

// StatusInput is a batch of status items probed by one activity (or of
// hosts checked by one).
type StatusInput struct {
	TaskID string      `json:"task_id"`
	Items  []proc.Item `json:"items"`
	Offset int         `json:"offset"`
}

// HostCancel is one cancel to hand to a host workflow: a task id, or one
// request's id.
type HostCancel struct {
	Host proc.HostID `json:"host"`
	ID   string      `json:"id"`
}

// CancelHostsInput lists the cancels of one Operate workflow (at most
// ChunkSize hosts' worth).
type CancelHostsInput struct {
	Cancels []HostCancel `json:"cancels"`
}

// AwaitChunkInput names one chunk of a split task and its item count.
type AwaitChunkInput struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
}

// ErrChunkNotFound is the error type of a chunk wait whose chunk has no
// workflow: waiting longer is vain.
const ErrChunkNotFound = "ChunkNotFound"

// HealthGateInput is the hosts of one rollout chunk whose op succeeded,
// to be held alive and healthy for MinHealthy.
type HealthGateInput struct {
	TaskID     string        `json:"task_id"`
	Items      []proc.Item   `json:"items"`
	MinHealthy time.Duration `json:"min_healthy"`
	Every      time.Duration `json:"every"`
}

// HealthFailure is an item (by its index in HealthGateInput.Items) found
// dead or unhealthy, and why.
type HealthFailure struct {
	Index int    `json:"index"`
	Why   string `json:"why"`
}

// ArmInput is one arm of a shard, through the ArmWatch activity.
type ArmInput struct {
	Shard string   `json:"shard"`
	Arm   ShardArm `json:"arm"`
	// WatchQueue is where the shard runs its watch, when the arm starts it.
	WatchQueue string `json:"watch_queue"`
	// Watch is what the host armed, handed to a watch on the same worker
	// (activities.HandOffWatch); none for a disarm.
	Watch *activities.WatchInput `json:"watch,omitempty"`
	// Ends is, for a disarm, the last generation the host armed
	// (activities.EndWatch).
	Ends int `json:"ends,omitempty"`
}
