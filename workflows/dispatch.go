package workflows

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/errgroup"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// dispatchParallel bounds concurrent signal-with-start calls per dispatch.
const dispatchParallel = 32

// Dispatcher hands task items to host workflows, and probes status batches
// itself.
type Dispatcher struct {
	Client    client.Client
	TaskQueue string
	Inventory *inventory.Inventory
	Acts      *activities.Activities
	// Supervision is handed to every host workflow with its requests.
	Supervision Supervision
	// DataConverter decodes host workflows' memos, as the client encodes
	// payloads; nil means the default.
	DataConverter converter.DataConverter

	armsOnce sync.Once
	arms     *armBatcher
}

// DispatchInput is one Operate workflow's items to hand out.
type DispatchInput struct {
	ReplyTo string      `json:"reply_to"`
	TaskID  string      `json:"task_id"`
	Op      proc.OpType `json:"op_type"`
	Manage  bool        `json:"manage,omitempty"`
	Items   []proc.Item `json:"items"`
	Offset  int         `json:"offset"`
	// Issued is when the task handed its items out, by the workflow's
	// clock: each request's deadline counts from it.
	Issued time.Time `json:"issued,omitempty"`
	// Files is a file op's files and options; nil for every other op.
	Files *proc.FileOp `json:"files,omitempty"`
	// TaskSize is the whole task's item count, when these are one chunk
	// of it; 0 means these items are the whole task.
	TaskSize int `json:"task_size,omitempty"`
}

// DispatchOutput lists items answered without a host workflow (unknown
// hosts) and items that could not be delivered.
type DispatchOutput struct {
	Answered    []HostReply `json:"answered,omitempty"`
	Undelivered []int       `json:"undelivered,omitempty"`
}

// Dispatch signals each item's host workflow, starting it if needed. It is
// safe to retry: host workflows drop a request id they have seen.
func (d *Dispatcher) Dispatch(ctx context.Context, in DispatchInput) (DispatchOutput, error) {
	var out DispatchOutput
	var mu sync.Mutex
	var firstErr error
	var g errgroup.Group
	g.SetLimit(dispatchParallel)
	var deadlines []time.Time
	if !in.Issued.IsZero() {
		deadlines = policies.TaskDeadlines(in.Issued, in.Op, in.Items, in.TaskSize)
	}
	for i, it := range in.Items {
		global := in.Offset + i
		if _, ok := d.Inventory.Lookup(it.Target.HostID()); !ok {
			out.Answered = append(out.Answered, HostReply{Index: global, Result: unknownHost(it.Target)})
			continue
		}
		req := HostRequest{
			RequestID: RequestID(in.TaskID, global), TaskID: in.TaskID, ReplyTo: in.ReplyTo, Index: global,
			Op: in.Op, Target: it.Target, Process: it.Process, Spec: it.Spec, Manage: in.Manage,
			Supervision: &d.Supervision, Files: in.Files,
		}
		if deadlines != nil {
			req.Deadline = deadlines[i]
		}
		g.Go(func() error {
			lost, err := d.deliver(ctx, it.Target.HostID(), req)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				if firstErr == nil {
					firstErr = err
				}
				out.Undelivered = append(out.Undelivered, i)
			case lost != nil:
				out.Answered = append(out.Answered, HostReply{Index: global, Result: *lost})
			}
			return nil
		})
		if i%100 == 0 {
			activity.RecordHeartbeat(ctx, i)
		}
	}
	_ = g.Wait()
	// A transient failure is retried whole; duplicates are dropped by hosts.
	if firstErr != nil && activity.GetInfo(ctx).Attempt < 3 {
		return DispatchOutput{}, firstErr
	}
	return out, nil
}

// deliver signals a request to its host's workflow, starting the workflow
// when the host has none yet. A closed one is never replaced (see
// hostloss.go): the server refuses the start, and only then is the
// workflow described, so the common case costs one call. It returns the
// request's answer when the host workflow is closed.
func (d *Dispatcher) deliver(ctx context.Context, id proc.HostID, req HostRequest) (*proc.HostResult, error) {
	// Twice at most: a workflow found running on the describe continued
	// as new, or was restored, between the two calls.
	for attempt := 0; ; attempt++ {
		_, err := d.Client.SignalWithStartWorkflow(ctx, HostWorkflowID(id), OpSignal, req, client.StartWorkflowOptions{
			ID: HostWorkflowID(id), TaskQueue: d.TaskQueue,
			WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		}, HostWorkflowName, newHostState(id, d.Supervision))
		if !alreadyStarted(err) {
			return nil, err
		}
		lost, derr := closedHost(ctx, d.Client, id)
		if derr != nil || lost != nil || attempt == 1 {
			if derr == nil && lost == nil {
				derr = err
			}
			return lost, derr
		}
	}
}

// unknownHost answers an item whose host the inventory does not have: by
// the agent id the caller sent when nothing mapped it to a host.
func unknownHost(t proc.Target) proc.HostResult {
	if !t.Resolved() {
		return proc.Fail(proc.CodeUnknownHost, "agent id %q is not in the inventory (give its host agent_id, or send <bk_cloud_id>:<ip>)", t.AgentID)
	}
	return proc.Fail(proc.CodeUnknownHost, "host bk_cloud_id=%d ip=%s is not in the inventory", t.CloudID, t.IP)
}
