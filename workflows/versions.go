package workflows

// The ledger of changes to running workflows. Host workflows never end
// and tasks can run for hours, so a new worker replays histories written
// by older code: every change to the commands a workflow issues is guarded
// by workflow.GetVersion with an id listed here, and the branch the old
// histories take is kept until the change is retired (TestLedger fails on
// a GetVersion id missing from Ledger).
//
// A change's old branch may go once no workflow that can reach it runs: a
// Host change once every host workflow has continued as new on a worker
// that has it (when its history grows long, or at its next op after
// `starter setup --renew`), an Operate change once every task begun before
// it has ended (within policies.TaskBackstop). Then the corpus histories
// that take the old branch are replaced with new recordings, the version
// is pinned and the branch deleted (docs/upgrades.md).

// Change ids, one per guarded change.
const (
	VersionUpdateRegisters    = "update-registers"
	VersionChunkedStatus      = "chunked-status"
	VersionChunkedOutcome     = "chunked-outcome"
	VersionConfigFiles        = "config-files"
	VersionRequestDeadline    = "request-deadline"
	VersionCrashBackoff       = "crash-backoff"
	VersionUnhealthyStopStart = "unhealthy-stop-start"
	VersionCrontabZone        = "crontab-zone"
	VersionWatchQueue         = "watch-queue"
	VersionWatchShard         = "watch-shard"
	VersionCancelTask         = "cancel-task"
	VersionRegistryMemo       = "registry-memo"
	VersionRenewSignal        = "renew-signal"
	VersionTaskOpAttempts     = "task-op-attempts"
	VersionDeliverUpdates     = "deliver-updates"
	VersionTaskOpLocal        = "task-op-local"
	VersionRegistrySpecs      = "registry-specs"
	VersionArmLocal           = "arm-local"
	VersionFileOpCancels      = "file-op-cancels"
)

// Change is one entry of the ledger.
type Change struct {
	ID string
	// Workflow is the workflow type whose histories take the old branch.
	Workflow string
	// What the change does, and what the old branch did.
	What string
	// Old is where the code only old histories reach lives.
	Old string
}

// Ledger lists every change, oldest first.
var Ledger = []Change{
	{VersionUpdateRegisters, HostWorkflowName,
		"update_proc_info of a process not yet registered registers it (it answered 9106)", "host.go handleSpec"},
	{VersionChunkedStatus, OperateWorkflowName,
		"a status task of more than ChunkSize items splits into chunks (it ran as one workflow)", "operate.go Operate"},
	{VersionChunkedOutcome, OperateWorkflowName,
		"a task split into chunks records its outcome and failed count in its search attributes (it never did)", "operate.go Operate"},
	{VersionConfigFiles, HostWorkflowName,
		"a host runs file ops: push, repair, logs (it answered them 832)", "files.go handleFiles"},
	{VersionRequestDeadline, HostWorkflowName,
		"a request dequeued after its deadline answers 9105 without running (it ran, however late)", "host.go tooLate"},
	{VersionCrashBackoff, HostWorkflowName,
		"a crash-looping process is started again after a growing delay (at once, every poll)", "supervise.go restart"},
	{VersionUnhealthyStopStart, HostWorkflowName,
		"an unhealthy process is stopped, then started (restarted with op_type 7)", "supervise.go decide"},
	{VersionCrontabZone, HostWorkflowName,
		"crontab rules are read in the zone the watch learned (in UTC)", "supervise.go setZone"},
	{VersionWatchQueue, HostWorkflowName,
		"watches run on their own task queue (on the ops' queue)", "supervise.go startWatch"},
	{VersionWatchShard, HostWorkflowName,
		"a host is watched by its shard's watch (by a watch activity of its own)", "watchshard.go sharded"},
	{VersionCancelTask, HostWorkflowName + ", " + OperateWorkflowName,
		"a task's cancel reaches its hosts, which end or drop its requests (the cancel was ignored)", "cancel.go, operate_cancel.go"},
	{VersionRegistryMemo, HostWorkflowName,
		"a host keeps its registry digest in its memo (none)", "digest.go publish"},
	{VersionRenewSignal, HostWorkflowName,
		"a renew signal has the host continue as new at its next op (ignored)", "host.go renewAsked"},
	{VersionTaskOpAttempts, HostWorkflowName,
		"a task's op is retried by its host, one activity per attempt (the server retried one activity)", "legacy_host.go"},
	{VersionDeliverUpdates, OperateWorkflowName,
		"a task hands its items to hosts by update in batches and reads their answers from the batches " +
			"(a Dispatch activity signalled every host, and each host signalled its answer back)", "legacy_operate.go"},
	{VersionTaskOpLocal, HostWorkflowName,
		"a task's op runs as a local activity for up to policies.LocalOpBudget, then as an activity (always an activity)", "task_op.go tryOp"},
	{VersionRegistrySpecs, HostWorkflowName,
		"a host keeps its specs in its memo, which status reads with one listing (status queried each host)", "digest.go publish"},
	{VersionArmLocal, HostWorkflowName,
		"a host arms its shard with a local activity (an activity)", "watchshard.go armShard"},
	{VersionFileOpCancels, HostWorkflowName,
		"a task's cancel ends its file op while it runs (once the op had ended)", "files.go runFiles"},
}
