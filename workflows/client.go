package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sync/errgroup"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// ErrTaskNotFound means no workflow has the task id.
var ErrTaskNotFound = errors.New("task not found")

// StartOperate starts the op's workflow under its task id. Starting the same
// task id twice is refused by the server, so a retried submission never runs
// an op twice.
func StartOperate(ctx context.Context, c client.Client, taskQueue string, in OperateInput) error {
	return startOperate(ctx, c, taskQueue, in, nil)
}

// startOperate starts the task with drover's search attributes; on a
// namespace that lacks them (`worker setup` not run) it starts the task
// without them rather than refusing it.
func startOperate(ctx context.Context, c client.Client, taskQueue string, in OperateInput, memo map[string]any) error {
	if len(in.Items) > policies.ChunkSize {
		return splitTask(ctx, c, taskQueue, in, memo)
	}
	opts := client.StartWorkflowOptions{
		ID:                    in.TaskID,
		TaskQueue:             taskQueue,
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		Memo:                  memo,
	}
	indexed := in
	indexed.Indexed = true
	return startIndexed(ctx, c, opts, taskSearchAttributes(in), OperateWorkflowName, indexed, in)
}

// startIndexed starts workflow name with search attributes sa and input
// indexed; on a namespace that lacks them it starts it with plain instead.
func startIndexed(ctx context.Context, c client.Client, opts client.StartWorkflowOptions, sa temporal.SearchAttributes, name string, indexed, plain any) error {
	withSA := opts
	withSA.TypedSearchAttributes = sa
	_, err := c.ExecuteWorkflow(ctx, withSA, name, indexed)
	var invalid *serviceerror.InvalidArgument
	if errors.As(err, &invalid) && strings.Contains(strings.ToLower(invalid.Error()), "search attribute") {
		_, err = c.ExecuteWorkflow(ctx, opts, name, plain)
	}
	return err
}

// TaskMemo summarises a task for the Temporal UI: the API, op, size and who
// asked. It names the operator and the app, never a secret or a token.
func TaskMemo(t *gseapi.Task) map[string]any {
	m := map[string]any{"api": t.API, "op": t.Op.String(), "items": len(t.Items)}
	if t.Caller.Username != "" {
		m["operator"] = t.Caller.Username
	}
	if t.Caller.AppCode != "" {
		m["app"] = t.Caller.AppCode
	}
	return m
}

// WaitOperate blocks until the task's workflow finishes. The wait is a
// long poll that a loaded server can end with an error of its own (its
// internal call cut short: "stream terminated by RST_STREAM") before the
// task ends: such a wait is asked again, as long as ctx lasts.
func WaitOperate(ctx context.Context, c client.Client, taskID string) (OperateResult, error) {
	for {
		var out OperateResult
		err := c.GetWorkflow(ctx, taskID, "").Get(ctx, &out)
		if err == nil || ctx.Err() != nil || !waitCutShort(err) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// waitCutShort reports whether a wait failed for the call, not for the
// workflow: anything but the workflow's own failure or an answer that
// asking again cannot change.
func waitCutShort(err error) bool {
	var wee *temporal.WorkflowExecutionError
	var nf *serviceerror.NotFound
	var ia *serviceerror.InvalidArgument
	var pd *serviceerror.PermissionDenied
	var nnf *serviceerror.NamespaceNotFound
	return !errors.As(err, &wee) && !errors.As(err, &nf) && !errors.As(err, &ia) && !errors.As(err, &pd) && !errors.As(err, &nnf)
}

// FetchOperate returns the task's results: final ones when it has finished,
// else progress so far with unfinished hosts at 115. A task split into
// chunks is read chunk by chunk and merged.
func FetchOperate(ctx context.Context, c client.Client, taskID string) (OperateResult, error) {
	out, err := fetchOne(ctx, c, taskID)
	if err != nil || len(out.Chunks) == 0 {
		return out, err
	}
	merged := OperateResult{TaskID: out.TaskID, Total: out.Total}
	for n, id := range out.Chunks {
		part, err := fetchOne(ctx, c, id)
		if errors.Is(err, ErrTaskNotFound) {
			// Not started yet: its items are pending, and every key is
			// answered all the same.
			var pending []KeyedResult
			if _, err := QueryOpen(ctx, c, taskID, ChunkPendingQuery, &pending, n); err != nil {
				return out, err
			}
			merged.Results = append(merged.Results, pending...)
			continue
		}
		if err != nil {
			return out, err
		}
		merged.Done += part.Done
		merged.Results = append(merged.Results, part.Results...)
	}
	return merged, nil
}

// WaitOperateAll waits for the task and returns every host's result, merged
// across chunks.
func WaitOperateAll(ctx context.Context, c client.Client, taskID string) (OperateResult, error) {
	if _, err := WaitOperate(ctx, c, taskID); err != nil {
		return OperateResult{}, err
	}
	return FetchOperate(ctx, c, taskID)
}

func fetchOne(ctx context.Context, c client.Client, taskID string) (OperateResult, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, taskID, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return OperateResult{}, fmt.Errorf("%w: %s", ErrTaskNotFound, taskID)
		}
		return OperateResult{}, err
	}
	var out OperateResult
	if desc.WorkflowExecutionInfo.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		v, err := c.QueryWorkflow(ctx, taskID, "", ProgressQuery)
		if err != nil {
			return out, err
		}
		return out, v.Get(&out)
	}
	return WaitOperate(ctx, c, taskID)
}

// Engine runs GSE tasks as Operate workflows; it implements gseapi.Engine.
type Engine struct {
	Client    client.Client
	TaskQueue string
	// Now stamps task ids; nil means time.Now.
	Now func() time.Time
	// Inventory maps agent ids (agent_id_list) to hosts; nil maps only
	// the "<bk_cloud_id>:<ip>" form.
	Inventory *inventory.Inventory
	// Files is the content store (files_dir) pushes keep their contents
	// in; nil refuses pushes.
	Files gseapi.ContentStore
	// DataConverter decodes host workflows' memos, as the client encodes
	// payloads; nil means the default.
	DataConverter converter.DataConverter
}

// ContentStore is the engine's content store, for the file APIs.
func (e *Engine) ContentStore() gseapi.ContentStore { return e.Files }

// Start begins a task under a new task id.
func (e *Engine) Start(ctx context.Context, t *gseapi.Task) (string, error) {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	in := OperateInput{TaskID: gseapi.NewTaskID(now()), Op: t.Op, Items: e.withAccounts(t.Items), Manage: t.Manage, Files: t.Files}
	if err := startOperate(ctx, e.Client, e.TaskQueue, in, TaskMemo(t)); err != nil {
		return "", fmt.Errorf("%w: %v", gseapi.ErrUnavailable, err)
	}
	return in.TaskID, nil
}

// Results returns a task's per-key results.
func (e *Engine) Results(ctx context.Context, taskID string, wait bool) ([]proc.KeyedResult, error) {
	var res OperateResult
	var err error
	if wait {
		res, err = WaitOperateAll(ctx, e.Client, taskID)
	} else {
		res, err = FetchOperate(ctx, e.Client, taskID)
	}
	if errors.Is(err, ErrTaskNotFound) {
		return nil, fmt.Errorf("%w: %s", gseapi.ErrTaskNotFound, taskID)
	}
	if err != nil {
		return nil, err
	}
	return res.Results, nil
}

// Counts returns a task's progress in numbers (see TaskCounts).
func (e *Engine) Counts(ctx context.Context, taskID string) (Counts, error) {
	cnt, err := TaskCounts(ctx, e.Client, taskID)
	if errors.Is(err, ErrTaskNotFound) {
		return Counts{}, fmt.Errorf("%w: %s", gseapi.ErrTaskNotFound, taskID)
	}
	return cnt, err
}

// Cancel cancels a running task (gseapi.Canceller); done reports one that
// had already finished.
func (e *Engine) Cancel(ctx context.Context, taskID string) (bool, error) {
	done, err := CancelTask(ctx, e.Client, taskID)
	switch {
	case errors.Is(err, ErrTaskNotFound):
		return false, fmt.Errorf("%w: %s", gseapi.ErrTaskNotFound, taskID)
	case err != nil:
		return false, fmt.Errorf("%w: %v", gseapi.ErrUnavailable, err)
	}
	return done, nil
}

// AgentHost maps a GSE agent id to its inventory host, so a task's keys
// are known when it starts; without an inventory, only the
// "<bk_cloud_id>:<ip>" form names a host.
func (e *Engine) AgentHost(agentID string) (proc.Target, bool) {
	if e.Inventory == nil {
		return proc.Target{}, false
	}
	h, ok := e.Inventory.ByAgentID(agentID)
	if !ok {
		return proc.Target{}, false
	}
	return proc.Target{CloudID: h.CloudID, SupplierID: h.SupplierID, IP: h.IP}, true
}

// withAccounts gives each inline spec that names no account its host's
// account from the inventory (an Ansible host's ansible_become_user), so
// the registry records who runs the process. Specs are copied, not edited.
func (e *Engine) withAccounts(items []proc.Item) []proc.Item {
	if e.Inventory == nil {
		return items
	}
	var out []proc.Item
	for i, it := range items {
		if it.Spec == nil || it.Spec.Account != "" {
			continue
		}
		h, ok := e.Inventory.Lookup(it.Target.HostID())
		if !ok || h.Account == "" {
			continue
		}
		if out == nil {
			out = slices.Clone(items)
		}
		spec := *it.Spec
		spec.Account = h.Account
		out[i].Spec = &spec
	}
	if out == nil {
		return items
	}
	return out
}

// HostAgent returns the inventory's agent id of a host, "" without one.
func (e *Engine) HostAgent(id proc.HostID) string {
	if e.Inventory == nil {
		return ""
	}
	h, _ := e.Inventory.Lookup(id)
	return h.AgentID
}

// Registered lists every registered (host, process) of a namespace (and
// name, when given), from the specs memos of all running host workflows,
// read with one paged listing; only a host without the memo (a run begun
// before it) is asked by query.
func (e *Engine) Registered(ctx context.Context, namespace, name string) ([]proc.Item, error) {
	var out []proc.Item
	add := func(host proc.HostID, entries []Entry) {
		for _, en := range entries {
			if en.Process.Namespace == namespace && (name == "" || en.Process.Name == name) {
				out = append(out, proc.Item{Target: proc.Target{CloudID: host.CloudID, SupplierID: en.SupplierID, IP: host.IP}, Process: en.Process})
			}
		}
	}
	var ask []proc.HostID
	err := ScanRegistries(ctx, e.Client, e.DataConverter, RunningHosts(e.TaskQueue), listPageSize, func(host proc.HostID, entries []Entry, ok bool) {
		if ok && len(entries) < MaxDigestProcs {
			add(host, entries)
			return
		}
		ask = append(ask, host)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: list host workflows: %v", gseapi.ErrUnavailable, err)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fallbackParallel)
	for _, host := range ask {
		g.Go(func() error {
			var entries []Entry
			if _, err := QueryOpen(gctx, e.Client, HostWorkflowID(host), RegistryQuery, &entries); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			add(host, entries)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("%w: read a registry: %v", gseapi.ErrUnavailable, err)
	}
	return out, nil
}

// QueryOpen runs a query on a running workflow and decodes its answer into
// out. A workflow that does not exist or has closed answers found=false:
// asking a closed one would wait for a replay on a queue nobody may poll.
func QueryOpen(ctx context.Context, c client.Client, id, queryType string, out any, args ...any) (found bool, err error) {
	resp, err := c.QueryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: id, QueryType: queryType, Args: args, QueryRejectCondition: enums.QUERY_REJECT_CONDITION_NOT_OPEN})
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: %w", id, err)
	case resp.QueryRejected != nil:
		return false, nil
	}
	return true, resp.QueryResult.Get(out)
}
