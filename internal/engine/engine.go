// Package engine is drover's client of its workflows: it starts tasks
// (splitting large ones into chunks), waits for them, reads their results
// and counts, cancels them, runs rollouts, and lists the fleet's host
// workflows. It implements gseapi.Engine.
package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/errgroup"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

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
	in := workflows.OperateInput{TaskID: gseapi.NewTaskID(now()), Op: t.Op, Items: e.withAccounts(t.Items), Manage: t.Manage, Files: t.Files}
	if err := startOperate(ctx, e.Client, e.TaskQueue, in, TaskMemo(t)); err != nil {
		return "", fmt.Errorf("%w: %v", gseapi.ErrUnavailable, err)
	}
	return in.TaskID, nil
}

// Results returns a task's per-key results.
func (e *Engine) Results(ctx context.Context, taskID string, wait bool) ([]proc.KeyedResult, error) {
	var res workflows.OperateResult
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
func (e *Engine) Counts(ctx context.Context, taskID string) (workflows.Counts, error) {
	cnt, err := TaskCounts(ctx, e.Client, taskID)
	if errors.Is(err, ErrTaskNotFound) {
		return workflows.Counts{}, fmt.Errorf("%w: %s", gseapi.ErrTaskNotFound, taskID)
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
	add := func(host proc.HostID, entries []workflows.Entry) {
		for _, en := range entries {
			if en.Process.Namespace == namespace && (name == "" || en.Process.Name == name) {
				out = append(out, proc.Item{Target: proc.Target{CloudID: host.CloudID, SupplierID: en.SupplierID, IP: host.IP}, Process: en.Process})
			}
		}
	}
	var ask []proc.HostID
	err := ScanRegistries(ctx, e.Client, e.DataConverter, RunningHosts(e.TaskQueue), listPageSize, func(host proc.HostID, entries []workflows.Entry, ok bool) {
		if ok && len(entries) < workflows.MaxDigestProcs {
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
			var entries []workflows.Entry
			if _, err := QueryOpen(gctx, e.Client, workflows.HostWorkflowID(host), workflows.RegistryQuery, &entries); err != nil {
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
