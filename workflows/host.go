package workflows

import (
	"sort"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// maxSeen bounds the remembered request ids; a re-sent request arrives
// within seconds of the first, far inside this window.
const maxSeen = 2000

// host is the Host workflow's state with its run loop.
type host struct {
	HostState
	ops workflow.ReceiveChannel
	// watchBackoff delays the next watch after a failed one.
	watchBackoff time.Time
	// published is the digest last put in the memo in this run, and
	// publishedSpecs the registry.
	published      *Digest
	publishedSpecs *[]RegistryEntry
	renew          workflow.ReceiveChannel
	// watchEvents brings a shard watch's events; armed is what the host
	// armed its shard with at WatchGen, nil once decided on (or in a new
	// run, which arms again).
	watchEvents workflow.ReceiveChannel
	// watchUpdates brings the events of WatchEventsUpdate.
	watchUpdates workflow.Channel
	armed        *activities.WatchInput
	// arming is the arm under way, if any.
	arming  workflow.Future
	cancels workflow.ReceiveChannel
	// updates brings the requests of OpUpdate; waiting are their ids
	// not yet answered.
	updates workflow.Channel
	waiting []string
}

// maxEvents bounds the events a host keeps; older ones are dropped.
const maxEvents = 200

// Host owns one host's registry, runs its ops one at a time, and supervises
// its managed processes. It never ends on its own: it continues as new
// when its history grows long.
func Host(ctx workflow.Context, st HostState) error {
	h := &host{HostState: st, ops: workflow.GetSignalChannel(ctx, OpSignal), renew: workflow.GetSignalChannel(ctx, RenewSignal),
		watchEvents: workflow.GetSignalChannel(ctx, WatchEventsSignal), cancels: workflow.GetSignalChannel(ctx, CancelTaskSignal),
		updates: workflow.NewBufferedChannel(ctx, updateBuffer), watchUpdates: workflow.NewBufferedChannel(ctx, updateBuffer)}
	if err := workflow.SetUpdateHandler(ctx, OpUpdate, h.onOp); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, WatchEventsUpdate, h.onWatchEvents,
		workflow.UpdateHandlerOptions{Validator: h.validWatchEvents}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, RegistryQuery, func() ([]Entry, error) {
		return h.Entries, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, WatchInputQuery, h.watchQuery); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, EventsQuery, func() ([]Event, error) {
		return h.Events, nil
	}); err != nil {
		return err
	}
	for {
		h.drain()
		h.takeCancels(ctx)
		if len(h.Queue) > 0 {
			req := h.Queue[0]
			h.Queue = h.Queue[1:]
			if h.seen(req.RequestID) {
				continue
			}
			h.remember(req.RequestID)
			if req.Supervision != nil {
				h.Supervision = *req.Supervision
			}
			if h.cancelled(req) {
				h.reply(ctx, req, notRunCancelled(req))
				continue
			}
			if res, late := h.tooLate(ctx, req); late {
				h.reply(ctx, req, res)
				continue
			}
			res := h.handle(ctx, req)
			h.reply(ctx, req, res)
			continue
		}
		if h.runDue(ctx) {
			continue
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() || h.renewAsked(ctx) {
			h.drain()
			h.takeCancels(ctx)
			if len(h.Queue) > 0 {
				continue
			}
			// Every update is answered by now; its handler returns
			// before the run ends, or its caller would see it fail.
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			// The next run is this worker's code from its start.
			next := h.HostState
			next.Born = LedgerGen
			return workflow.NewContinueAsNewError(ctx, Host, next)
		}
		h.publish(ctx)
		h.wait(ctx)
	}
}

// renewAsked reports whether a new run was asked for. The renewal is
// versioned where only a renew signal leads, so a history without one
// replays unchanged, and one that a worker without renewals ignored stays
// ignored on replay. A renew signal does not wake an idle host: it takes
// effect at its next op, supervision decision or watch renewal.
func (h *host) renewAsked(ctx workflow.Context) bool {
	asked := false
	for h.renew.ReceiveAsync(nil) {
		asked = true
	}
	return asked && h.has(ctx, VersionRenewSignal)
}

// drain queues every request already delivered, without blocking.
func (h *host) drain() {
	for _, ch := range []workflow.ReceiveChannel{h.ops, h.updates} {
		for {
			var req HostRequest
			if !ch.ReceiveAsync(&req) {
				break
			}
			h.Queue = append(h.Queue, req)
		}
	}
}

// tooLate answers a request dequeued after its deadline without running
// it: its task may have given up on it, and an op run after that would be
// one nobody waits for. Guarded, so a history in which a late request ran
// replays as it ran.
func (h *host) tooLate(ctx workflow.Context, req HostRequest) (proc.HostResult, bool) {
	now := workflow.Now(ctx)
	if !policies.Passed(req.Deadline, now) || !h.has(ctx, VersionRequestDeadline) {
		return proc.HostResult{}, false
	}
	return proc.Fail(proc.CodeTimeout, "not run: deadline passed (it had to start by %s and was dequeued at %s, behind earlier ops or a slow engine)",
		req.Deadline.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)), true
}

func (h *host) seen(id string) bool {
	for _, s := range h.Seen {
		if s == id {
			return true
		}
	}
	return false
}

func (h *host) remember(id string) {
	h.Seen = append(h.Seen, id)
	if len(h.Seen) > maxSeen {
		h.Seen = h.Seen[len(h.Seen)-maxSeen:]
	}
}

func (h *host) reply(ctx workflow.Context, req HostRequest, res proc.HostResult) {
	if req.ReplyTo == "" {
		if h.answer(req, res) {
			// A requester that reads the fleet's memos after its answer
			// sees the op.
			h.publish(ctx)
		}
		return
	}
	h.replyBySignal(ctx, req, res)
}

func (h *host) find(p proc.ProcessID) int {
	for i := range h.Entries {
		if h.Entries[i].Process == p {
			return i
		}
	}
	return -1
}

// indexOwner finds another entry already using a spec's value_key.
func (h *host) indexOwner(p proc.ProcessID, spec proc.Spec) (proc.ProcessID, bool) {
	for _, e := range h.Entries {
		if e.Process != p && e.Spec.Index() == spec.Index() {
			return e.Process, true
		}
	}
	return proc.ProcessID{}, false
}

func (h *host) handle(ctx workflow.Context, req HostRequest) proc.HostResult {
	now := workflow.Now(ctx).Unix()
	switch {
	case req.Op.IsSpecOp():
		return h.handleSpec(ctx, req, now)
	case req.Op.IsFileOp() && req.Files != nil:
		return h.handleFiles(ctx, req)
	case !req.Op.Valid():
		return proc.Fail(proc.CodeBadOpType, "op_type %d is not one of 0,1,2,3,4,7,8,9", int(req.Op))
	}
	i := h.find(req.Process)
	if req.Spec != nil {
		// An inline spec (operate_proc) is registered, or replaces the
		// registered one, before the op runs on it.
		if other, clash := h.indexOwner(req.Process, *req.Spec); clash {
			return proc.Fail(proc.CodeBadSpec, "value_key %q is already used by %s/%s on this host", req.Spec.Index(), other.Namespace, other.Name)
		}
		if i < 0 {
			h.Entries = append(h.Entries, Entry{Process: req.Process, Registration: proc.Registration{RegisterTime: now}})
			h.sortEntries()
			i = h.find(req.Process)
		}
		h.Entries[i].Spec = *req.Spec
	}
	if i >= 0 {
		h.Entries[i].SupplierID = req.Target.SupplierID
	}
	if i < 0 {
		return proc.Fail(proc.CodeNotRegistered, "process %s/%s is not registered on host %s; register it with register_proc_info", req.Process.Namespace, req.Process.Name, h.Host)
	}
	e := &h.Entries[i]
	switch req.Op {
	case proc.OpRegister:
		manage(e)
		return controlResult(e, proc.HostResult{Code: proc.CodeSuccess, Message: "success"})
	case proc.OpUnregister:
		expected := e.Expected // no longer managed, but still meant to run
		unmanage(e)
		e.Expected = expected
		return controlResult(e, proc.HostResult{Code: proc.CodeSuccess, Message: "success"})
	case proc.OpStop, proc.OpKill:
		// Operators win: the process is unmanaged before it is stopped, so
		// supervision can never bring back what an operator took down.
		unmanage(e)
	}
	out := h.runOp(ctx, req, *e)
	e.saw(out, workflow.Now(ctx))
	if out.Started {
		manage(e)
		e.LastStartTime = now
		if e.Spec.AutoType == proc.AutoPeriodic {
			e.LastRun, e.NextRun = workflow.Now(ctx), time.Time{}
		}
	}
	if out.Alive {
		e.Pid, e.StartTicks = out.Pid, out.StartTicks
	}
	if out.Result.Content == "" {
		return controlResult(e, out.Result)
	}
	return out.Result
}

func (h *host) handleSpec(ctx workflow.Context, req HostRequest, now int64) proc.HostResult {
	i := h.find(req.Process)
	switch req.Op {
	case proc.OpSpecRegister:
		if i >= 0 {
			return proc.Fail(proc.CodeAlreadyExists, "process %s/%s is already registered on this host", req.Process.Namespace, req.Process.Name)
		}
		if req.Spec == nil {
			return proc.Fail(proc.CodeBadSpec, "register needs a spec")
		}
		if other, clash := h.indexOwner(req.Process, *req.Spec); clash {
			return proc.Fail(proc.CodeBadSpec, "value_key %q is already used by %s/%s on this host", req.Spec.Index(), other.Namespace, other.Name)
		}
		h.Entries = append(h.Entries, Entry{Process: req.Process, Spec: *req.Spec, SupplierID: req.Target.SupplierID,
			Registration: proc.Registration{Managed: req.Manage, Expected: req.Manage, RegisterTime: now}})
		h.sortEntries()
	case proc.OpSpecUpdate:
		if i < 0 && h.has(ctx, VersionUpdateRegisters) {
			// GSE 2.0 callers register through update and count 0 and
			// 850 alike as success: an update of what is not there
			// registers it.
			req.Op = proc.OpSpecRegister
			return h.handleSpec(ctx, req, now)
		}
		if i < 0 {
			return proc.Fail(proc.CodeNotRegistered, "process %s/%s is not registered on this host", req.Process.Namespace, req.Process.Name)
		}
		if req.Spec == nil {
			return proc.Fail(proc.CodeBadSpec, "update needs a spec")
		}
		if other, clash := h.indexOwner(req.Process, *req.Spec); clash {
			return proc.Fail(proc.CodeBadSpec, "value_key %q is already used by %s/%s on this host", req.Spec.Index(), other.Namespace, other.Name)
		}
		h.Entries[i].Spec = *req.Spec
	case proc.OpSpecUnregister:
		if i < 0 {
			return proc.Fail(proc.CodeNotRunning, "process %s/%s is not registered on this host", req.Process.Namespace, req.Process.Name)
		}
		h.Entries = append(h.Entries[:i], h.Entries[i+1:]...)
	}
	return proc.HostResult{Code: proc.CodeSuccess, Message: "success"}
}

func (h *host) sortEntries() {
	sort.Slice(h.Entries, func(a, b int) bool {
		x, y := h.Entries[a].Process, h.Entries[b].Process
		if x.Namespace != y.Namespace {
			return x.Namespace < y.Namespace
		}
		return x.Name < y.Name
	})
}

// runOp runs the op's activity; a host that cannot be worked on still ends
// with a code, never with a workflow failure.
func (h *host) runOp(ctx workflow.Context, req HostRequest, e Entry) activities.HostOpOutput {
	h.publish(ctx)
	spec := policies.WithDefaults(e.Spec)
	in := activities.HostOpInput{
		RequestID: req.RequestID, Op: req.Op, Target: req.Target, Process: req.Process, Spec: spec,
		Registration: e.Registration, Pid: e.Pid, StartTicks: e.StartTicks,
	}
	if taskOf(req) != "" {
		// A task's op can be cancelled; supervision's own cannot.
		return h.runTaskOp(ctx, req, e, in)
	}
	var out activities.HostOpOutput
	if err := workflow.ExecuteActivity(opOptions(ctx, in, policies.OpAttempts), HostOpActivity, in).Get(ctx, &out); err != nil {
		out = activities.HostOpOutput{Result: activityFailure(err)}
	}
	return out
}

// opOptions are a host op's activity options, with the server trying it
// up to attempts times.
func opOptions(ctx workflow.Context, in activities.HostOpInput, attempts int) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: policies.HostOpDeadline(in.Op, in.Spec),
		HeartbeatTimeout:    policies.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    policies.OpRetryFirst,
			BackoffCoefficient: policies.OpRetryFactor,
			MaximumAttempts:    int32(attempts),
		},
		// A cancelled op answers once its remote command has ended.
		WaitForCancellation: true,
	})
}

// manage puts a process under supervision afresh.
func manage(e *Entry) {
	e.Managed, e.Cancelled, e.Expected = true, false, true
	e.Restart, e.RetryAt, e.RetryStop = policies.RestartState{}, time.Time{}, false
}

// unmanage takes a process out of supervision, with any pending restart.
func unmanage(e *Entry) {
	e.Managed, e.Cancelled, e.Expected = false, false, false
	e.Restart, e.RetryAt, e.RetryStop, e.NextRun = policies.RestartState{}, time.Time{}, false, time.Time{}
}

// controlResult adds the control-op content callers expect.
func controlResult(e *Entry, r proc.HostResult) proc.HostResult {
	result := "success"
	if r.Code != proc.CodeSuccess {
		result = r.Message
	}
	r.Content = proc.EncodeContent(proc.ControlContent{Value: []proc.ControlValue{{
		ProcName: e.Spec.ProcName, SetupPath: e.Spec.SetupPath, FuncID: e.Spec.FuncID,
		InstanceID: e.Spec.InstanceID, Result: result, IsAuto: e.Managed,
	}}})
	return r
}
