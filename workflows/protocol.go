package workflows

// The protocol of drover's workflows: every workflow type, and every
// signal, query and update each takes, with its payload, and the memo
// fields readers list. Names are part of the histories of running
// workflows: they never change.

// TaskQueue is the default queue workers poll.
const TaskQueue = "drover"

// Activities, under the names workers register them by (the methods of
// activities.Activities and dispatch.Dispatcher). Histories record these
// names, so workflows schedule activities by them, never by a method value.
const (
	// HostOpActivity runs one op on one host: activities.HostOpInput →
	// activities.HostOpOutput. Also run as a local activity.
	HostOpActivity = "HostOp"
	// HostFilesActivity runs a file op: activities.FilesInput →
	// activities.FilesOutput.
	HostFilesActivity = "HostFiles"
	// WatchActivity watches one host's processes: activities.WatchInput →
	// activities.WatchOutput.
	WatchActivity = "Watch"
	// ShardWatchActivity watches a shard's hosts: activities.ShardWatchInput.
	ShardWatchActivity = "ShardWatch"
	// DeliverActivity hands a batch of items to their hosts by OpUpdate:
	// DeliverInput → []HostReply.
	DeliverActivity = "Deliver"
	// StatusActivity probes a batch of status items: StatusInput →
	// []HostReply.
	StatusActivity = "Status"
	// CheckActivity checks a batch of hosts: StatusInput → []HostReply.
	CheckActivity = "Check"
	// CancelHostsActivity hands cancels to host workflows:
	// CancelHostsInput.
	CancelHostsActivity = "CancelHosts"
	// AwaitChunkActivity waits for a chunk of a split task:
	// AwaitChunkInput → ChunkCounts.
	AwaitChunkActivity = "AwaitChunk"
	// HealthGateActivity holds a rollout batch's hosts healthy:
	// HealthGateInput → []HealthFailure.
	HealthGateActivity = "HealthGate"
	// ArmWatchActivity arms a host's shard: ArmInput. Also run as a
	// local activity.
	ArmWatchActivity = "ArmWatch"
	// DispatchActivity signals a task's items to their hosts:
	// DispatchInput → DispatchOutput. Only tasks begun before
	// VersionDeliverUpdates schedule it.
	DispatchActivity = "Dispatch"
)

// Workflow types.
const (
	// OperateWorkflowName runs one task (or one chunk of one):
	// OperateInput → OperateResult. Its id is the GSE task id.
	OperateWorkflowName = "Operate"
	// HostWorkflowName owns one host (HostState); id HostWorkflowID.
	HostWorkflowName = "Host"
	// WatchShardWorkflowName watches a shard of hosts (ShardState); id
	// ShardWorkflowID.
	WatchShardWorkflowName = "WatchShard"
	// RolloutWorkflowName runs a task in batches: RolloutInput.
	RolloutWorkflowName = "Rollout"
	// RolloutChunkWorkflowName holds one batch's results for readers.
	RolloutChunkWorkflowName = "RolloutChunk"
)

// Operate.
const (
	// ProgressQuery → OperateResult: every host's result so far, pending
	// ones as 115.
	ProgressQuery = "progress"
	// ChunkPendingQuery (chunk number) → []KeyedResult: a chunk not
	// started yet, its items pending.
	ChunkPendingQuery = "chunk-pending"
	// CountsQuery → Counts.
	CountsQuery = "counts"
	// CancelSignal (no payload) cancels the task.
	CancelSignal = "cancel"
	// ReplySignal carries a HostReply: a host's answer to a request sent
	// by OpSignal.
	ReplySignal = "reply"
	// AnswersSignal carries []HostReply: hosts' answers a Deliver batch
	// has so far, ahead of its result.
	AnswersSignal = "answers"
	// ChunkEndedSignal carries ChunkCounts: a chunk of a split task tells
	// the task its counts as it ends.
	ChunkEndedSignal = "chunk-ended"
)

// Host.
const (
	// OpUpdate carries a HostRequest; its outcome is the request's
	// proc.HostResult.
	OpUpdate = "op"
	// OpSignal carries a HostRequest answered by ReplySignal to its
	// ReplyTo: how tasks begun before OpUpdate hand over their items.
	OpSignal = "op"
	// CancelTaskSignal carries the id of a cancelled task, or of one
	// cancelled request ("<task id>#<index>").
	CancelTaskSignal = "cancel-task"
	// RenewSignal (no payload) asks for a new run at the host's next
	// wake.
	RenewSignal = "renew"
	// WatchEventsUpdate carries activities.ShardEvents from the host's
	// shard watch; the host refuses events of what it no longer watches.
	WatchEventsUpdate = "watch-events"
	// WatchEventsSignal is WatchEventsUpdate as shard watches sent it
	// before, and to hosts whose worker lacks the update.
	WatchEventsSignal = "watch-events"
	// RegistryQuery → []Entry: the host's registered processes.
	RegistryQuery = "registry"
	// EventsQuery → []Event: the host's recent events, oldest first.
	EventsQuery = "events"
	// WatchInputQuery → activities.HostWatch: what it armed its shard
	// with.
	WatchInputQuery = "watch-input"
)

// Host memo fields, read by one paged listing of host workflows rather
// than a query (and a worker's replay) per host.
const (
	// RegistryMemo holds a Digest: what runs where, for ps and events.
	RegistryMemo = "registry"
	// SpecsMemo holds []RegistryEntry: the specs a status probe needs.
	SpecsMemo = "specs"
	// LastEventMemo holds the newest Event.
	LastEventMemo = "last_event"
)

// WatchShard.
const (
	// ShardArmSignal carries a ShardArm.
	ShardArmSignal = "watch-arm"
	// ShardArmsSignal carries []ShardArm: a worker's arms of one shard,
	// made close together.
	ShardArmsSignal = "watch-arms"
	// ShardMembersQuery → ShardState.
	ShardMembersQuery = "members"
)

// Rollout.
const (
	// RolloutSignal carries one of the Rollout* actions.
	RolloutSignal = "rollout"
	// RolloutStatusQuery → RolloutStatus.
	RolloutStatusQuery = "rollout-status"
)
