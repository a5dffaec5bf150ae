package workflows

import (
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// handleFiles runs a file op in the host's workflow, one at a time with the
// host's other ops: a push and the reload after it, or a push and a
// supervision restart, never interleave. A push records each written
// file's md5 and source in the registry, so drift is checked against what
// was pushed and repair can restore it.
func (h *host) handleFiles(ctx workflow.Context, req HostRequest) proc.HostResult {
	if !h.has(ctx, VersionConfigFiles) {
		return proc.Fail(proc.CodeBadOpType, "op_type %d is not one of 0,1,2,3,4,7,8,9", int(req.Op))
	}
	i := h.find(req.Process)
	if i < 0 {
		return proc.Fail(proc.CodeNotRegistered, "process %s/%s is not registered on host %s; register it with register_proc_info", req.Process.Namespace, req.Process.Name, h.Host)
	}
	h.Entries[i].SupplierID = req.Target.SupplierID
	out := h.runFiles(ctx, req, h.Entries[i])
	e := &h.Entries[i]
	switch req.Op {
	case proc.OpPushConfig:
		for _, f := range req.Files.Files {
			if slices.Contains(out.Written, f.Path) {
				e.Spec.ConfigMap = proc.SetConfigFile(e.Spec.ConfigMap, f)
				h.restored(ctx, e, f.Path, "pushed")
			}
		}
		if out.Result.Code != proc.CodeSuccess {
			return controlResult(e, out.Result)
		}
		if then, ok := req.Files.ThenOp(); ok {
			next := req
			next.Op, next.Files, next.Spec = then, nil, nil
			res := h.handle(ctx, next)
			res.Message = out.Result.Message + "; then " + then.String() + ": " + res.Message
			return res
		}
		return controlResult(e, out.Result)
	case proc.OpRepairConfig:
		for _, p := range out.Written {
			h.restored(ctx, e, p, "repaired")
		}
		return controlResult(e, out.Result)
	}
	return out.Result
}

// restored clears a file's drift once a push or repair wrote the registered
// content, and records that it was restored.
func (h *host) restored(ctx workflow.Context, e *Entry, path, how string) {
	i := slices.Index(e.Drifted, path)
	if i < 0 {
		return
	}
	e.Drifted = slices.Delete(slices.Clone(e.Drifted), i, i+1)
	h.event(ctx, e.Process, EventConfigRestored, how+": "+path+" has its registered md5 again", e.Pid)
}

// runFiles runs the file op's activity. Its deadline grows with the bytes
// it moves; a host that cannot be worked on ends with a code.
func (h *host) runFiles(ctx workflow.Context, req HostRequest, e Entry) activities.FilesOutput {
	h.publish(ctx)
	spec := policies.WithDefaults(e.Spec)
	var bytes int64
	switch req.Op {
	case proc.OpPushConfig:
		bytes = policies.PushBytes(req.Files.Files)
	case proc.OpRepairConfig:
		for _, c := range spec.ConfigMap {
			if c.Source != nil {
				bytes += c.Source.Size
			}
		}
	}
	// A task's cancel ends a file op under way, as it does a control
	// op; guarded, since a history in which a file op ran to its end
	// through a cancel replays without the activity's cancel.
	takeCancels := taskOf(req) != "" && h.has(ctx, VersionFileOpCancels)
	fctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	actx := workflow.WithActivityOptions(fctx, workflow.ActivityOptions{
		StartToCloseTimeout: policies.FileOpDeadline(bytes),
		HeartbeatTimeout:    policies.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumAttempts:    3,
		},
		// A cancelled push answers once its transfer has stopped.
		WaitForCancellation: takeCancels,
	})
	var out activities.FilesOutput
	fut := workflow.ExecuteActivity(actx, HostFilesActivity, activities.FilesInput{
		RequestID: req.RequestID, Op: req.Op, Target: req.Target, Process: req.Process, Spec: spec, Files: *req.Files,
	})
	cancelled := takeCancels && h.awaitTakingCancels(ctx, req, fut, cancel)
	err := fut.Get(ctx, &out)
	switch {
	case cancelled && (err != nil || out.Result.Code != proc.CodeSuccess):
		why := "it was ended"
		if err == nil {
			why += " (" + strings.TrimSpace(out.Result.Message) + ")"
		}
		out = activities.FilesOutput{Written: out.Written, Result: proc.Fail(proc.CodeCancelled, "cancelled while running: %s", oneLine(why))}
	case err != nil:
		out = activities.FilesOutput{Result: activityFailure(err)}
	}
	out.Result.Message = strings.TrimSpace(out.Result.Message)
	return out
}
