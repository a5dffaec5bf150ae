package workflows

import "go.temporal.io/sdk/workflow"

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
// `worker setup --renew`), an Operate change once every task begun before
// it has ended (within policies.TaskBackstop). Then the corpus histories
// that take the old branch are replaced with new recordings, the version
// is pinned and the branch deleted (docs/upgrades.md).

// Change ids, one per guarded change.
const (
	VersionUpdateRegisters     = "update-registers"
	VersionChunkedStatus       = "chunked-status"
	VersionChunkedOutcome      = "chunked-outcome"
	VersionConfigFiles         = "config-files"
	VersionRequestDeadline     = "request-deadline"
	VersionCrashBackoff        = "crash-backoff"
	VersionUnhealthyStopStart  = "unhealthy-stop-start"
	VersionCrontabZone         = "crontab-zone"
	VersionWatchQueue          = "watch-queue"
	VersionWatchShard          = "watch-shard"
	VersionCancelTask          = "cancel-task"
	VersionRegistryMemo        = "registry-memo"
	VersionRenewSignal         = "renew-signal"
	VersionTaskOpAttempts      = "task-op-attempts"
	VersionDeliverUpdates      = "deliver-updates"
	VersionTaskOpLocal         = "task-op-local"
	VersionRegistrySpecs       = "registry-specs"
	VersionArmLocal            = "arm-local"
	VersionFileOpCancels       = "file-op-cancels"
	VersionAnswersCloseBatches = "answers-close-batches"
	VersionChunksTellTask      = "chunks-tell-task"
)

// Change is one entry of the ledger.
type Change struct {
	// Gen numbers the change, oldest first; the ledger only grows.
	Gen int
	ID  string
	// Workflow is the workflow type whose histories take the old branch.
	Workflow string
	// What the change does, and what the old branch did.
	What string
	// Old is where the code only old histories reach lives: files (of
	// workflows, or from the repository's root) each with the function
	// holding the branch, comma-separated; "gone" once it is retired.
	Old string
}

// Ledger lists every change, oldest first.
var Ledger = []Change{
	{1, VersionUpdateRegisters, HostWorkflowName,
		"update_proc_info of a process not yet registered registers it (it answered 9106)", "host.go handleSpec"},
	{2, VersionChunkedStatus, OperateWorkflowName,
		"a status task of more than ChunkSize items splits into chunks (it ran as one workflow)", "operate.go Operate"},
	{3, VersionChunkedOutcome, OperateWorkflowName,
		"a task split into chunks records its outcome and failed count in its search attributes (it never did)", "operate.go Operate"},
	{4, VersionConfigFiles, HostWorkflowName,
		"a host runs file ops: push, repair, logs (it answered them 832)", "files.go handleFiles"},
	{5, VersionRequestDeadline, HostWorkflowName,
		"a request dequeued after its deadline answers 9105 without running (it ran, however late)", "host.go tooLate"},
	{6, VersionCrashBackoff, HostWorkflowName,
		"a crash-looping process is started again after a growing delay (at once, every poll)", "supervise.go restart"},
	{7, VersionUnhealthyStopStart, HostWorkflowName,
		"an unhealthy process is stopped, then started (restarted with op_type 7)", "supervise.go decide"},
	{8, VersionCrontabZone, HostWorkflowName,
		"crontab rules are read in the zone the watch learned (in UTC)", "supervise.go setZone"},
	{9, VersionWatchQueue, HostWorkflowName,
		"watches run on their own task queue (on the ops' queue)", "old_host.go startWatchOnOpsQueue"},
	{10, VersionWatchShard, HostWorkflowName,
		"a host is watched by its shard's watch (by a watch activity of its own)", "watchshard.go sharded"},
	{11, VersionCancelTask, HostWorkflowName + ", " + OperateWorkflowName,
		"a task's cancel reaches its hosts, which end or drop its requests (the cancel was ignored)",
		"cancel.go cancelTask, operate_cancel.go cancel, operate_chunks.go cancelChunks, old_operate.go undelivered"},
	{12, VersionRegistryMemo, HostWorkflowName,
		"a host keeps its registry digest in its memo (none)", "digest.go publish"},
	{13, VersionRenewSignal, HostWorkflowName,
		"a renew signal has the host continue as new at its next op (ignored)", "host.go renewAsked"},
	{14, VersionTaskOpAttempts, HostWorkflowName,
		"a task's op is retried by its host, one activity per attempt (the server retried one activity)", "old_host.go runTaskOpWhole"},
	{15, VersionDeliverUpdates, OperateWorkflowName,
		"a task hands its items to hosts by update in batches and reads their answers from the batches " +
			"(a Dispatch activity signalled every host, and each host signalled its answer back)",
		"old_operate.go runSignalled, old_host.go replyBySignal, activities/dispatch/old_dispatch.go Dispatch"},
	{16, VersionTaskOpLocal, HostWorkflowName,
		"a task's op runs as a local activity for up to policies.LocalOpBudget, then as an activity (always an activity)", "task_op.go tryOp"},
	{17, VersionRegistrySpecs, HostWorkflowName,
		"a host keeps its specs in its memo, which status reads with one listing (status queried each host)", "digest.go publish"},
	{18, VersionArmLocal, HostWorkflowName,
		"a host arms its shard with a local activity (an activity)", "watchshard.go armShard"},
	{19, VersionFileOpCancels, HostWorkflowName,
		"a task's cancel ends its file op while it runs (once the op had ended)", "files.go runFiles"},
	{20, VersionAnswersCloseBatches, OperateWorkflowName,
		"a batch is done once its AnswersSignal has answered every item, its activity's end not awaited " +
			"(only its end counted, so a completion the server lost cost a heartbeat timeout and a retry)",
		"operate.go runStatus, operate_deliver.go runDelivered"},
	{21, VersionChunksTellTask, OperateWorkflowName,
		"a chunk of a split task signals the task its counts as it ends, and the task takes them ahead of its wait " +
			"(only the wait's end counted, so a completion the server lost cost a heartbeat timeout and a retry)",
		"operate.go tellTask, operate_split.go runSplit"},
}

// LedgerGen is the newest change's Gen. A host workflow run begun on a
// worker that has every change up to it records its Born: it takes those
// changes' branches without asking GetVersion, so its first workflow task
// writes no version markers and search attribute updates for them. A
// marker an older worker wrote for such a change is skipped on replay.
var LedgerGen = Ledger[len(Ledger)-1].Gen

// genOf is a change's Gen; an id the ledger lacks (TestLedger fails on one)
// is newer than any run.
func genOf(id string) int {
	for _, c := range Ledger {
		if c.ID == id {
			return c.Gen
		}
	}
	return LedgerGen + 1
}

// has reports whether the host's run takes change id: a run born after it
// does, else GetVersion says.
func (h *host) has(ctx workflow.Context, id string) bool {
	return h.Born >= genOf(id) || workflow.GetVersion(ctx, id, workflow.DefaultVersion, 1) >= 1
}
