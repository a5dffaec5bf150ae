package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.temporal.io/sdk/activity"
	"golang.org/x/sync/errgroup"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/hostloss"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// Status probes a batch of items directly, without their host workflows: a
// read needs no serialising, and one activity for many hosts keeps the
// engine's cost per host small. Registered specs are read from the host
// workflows' memos, listed with those of the other batches the worker
// reads at the same time.
func (d *Dispatcher) Status(ctx context.Context, in workflows.StatusInput) ([]workflows.HostReply, error) {
	ctx, outlast := activities.OutlastLostHeartbeats(ctx)
	defer outlast()
	// Heartbeat while registries are read, too: the listing, or a host
	// read by query, can outlast the heartbeat timeout before any probe
	// (which heartbeats) has begun.
	defer activities.KeepAlive(ctx)()
	hosts := batchHosts(in.Items)
	for _, h := range hosts {
		// A cold worker has no connection yet: the handshake overlaps
		// the listing instead of following it. A failed dial is not
		// cached, so the probe's own Run reports it.
		if host, ok := d.Inventory.Lookup(h); ok {
			if c, ok := d.Acts.Runner.(connector); ok {
				go func() { _ = c.Connect(ctx, host) }()
			}
		}
	}
	registries := newRegistryCache(ctx, d.Client, d.registryLister(), hosts)
	out, err := answerEach(ctx, in, func(it proc.Item) (proc.HostResult, error) {
		return d.statusOne(ctx, registries, in.TaskID, it)
	})
	d.signalAll(ctx, out)
	return out, err
}

// signalAll sends a read batch's answers to its task as well as returning
// them, through the task's outbox: the task is done with the batch whether
// or not its completion reaches a loaded server. A batch that failed for
// some of its hosts sends the answers of the others, which its retry need
// not give.
func (d *Dispatcher) signalAll(ctx context.Context, out []workflows.HostReply) {
	if len(out) == 0 || !activity.IsActivity(ctx) {
		return
	}
	box := d.joinOutbox(activity.GetInfo(ctx).WorkflowExecution)
	for _, r := range out {
		box.add(r)
	}
	box.close(ctx)
}

// batchHosts is the hosts of items, each once, in the order they come.
func batchHosts(items []proc.Item) []proc.HostID {
	hosts := make([]proc.HostID, 0, len(items))
	seen := map[proc.HostID]bool{}
	for _, it := range items {
		if h := it.Target.HostID(); !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// answerEach answers every item of a batch read directly (Status, Check)
// with answer, statusParallel at a time, heartbeating every 50 answers.
// An item answer could not read for the engine's sake (its error) is not
// its host's failure: the batch returns the others' answers and the first
// such error, and is tried again.
func answerEach(ctx context.Context, in workflows.StatusInput, answer func(proc.Item) (proc.HostResult, error)) ([]workflows.HostReply, error) {
	out := make([]workflows.HostReply, len(in.Items))
	failed := make([]error, len(in.Items))
	var g errgroup.Group
	g.SetLimit(statusParallel)
	var done atomic.Int64
	for i, it := range in.Items {
		g.Go(func() error {
			res, err := answer(it)
			out[i], failed[i] = workflows.HostReply{Index: in.Offset + i, Result: res}, err
			if n := done.Add(1); n%50 == 0 {
				activity.RecordHeartbeat(ctx, n)
			}
			return nil
		})
	}
	_ = g.Wait()
	// A batch whose own context ended (its task was cancelled, its
	// deadline passed) answers nothing: the reads it cut short are not
	// the hosts' failures, and a retry, which a read allows, answers them.
	// A heartbeat a loaded server did not take no longer ends it
	// (activities.OutlastLostHeartbeats). A hung host is bounded by its
	// own probe's deadline, not by this.
	if err := activities.Ended(ctx); err != nil {
		return nil, err
	}
	answered := out[:0:0]
	var first error
	for i, err := range failed {
		switch {
		case err == nil:
			answered = append(answered, out[i])
		case first == nil:
			first = err
		}
	}
	if first != nil {
		return answered, fmt.Errorf("%d of %d hosts not read, for the engine: %w", len(out)-len(answered), len(out), first)
	}
	return out, nil
}

// statusParallel bounds concurrent probes in one status batch; the SSH pool
// further bounds sessions per host.
const statusParallel = 256

func (d *Dispatcher) statusOne(ctx context.Context, registries *registryCache, taskID string, it proc.Item) (proc.HostResult, error) {
	if _, ok := d.Inventory.Lookup(it.Target.HostID()); !ok {
		return unknownHost(it.Target), nil
	}
	entries, err := registries.get(ctx, it.Target.HostID(), it.Process)
	var lost *hostloss.Error
	switch {
	case errors.As(err, &lost) && it.Spec == nil:
		return hostloss.Answer(lost.Host, lost.Status), nil
	case errors.As(err, &lost):
		// An inline spec needs no registry: the probe still answers.
		entries, err = nil, nil
	case err != nil:
		return registryFailure(it.Target, err)
	}
	in, res := statusInput(it, entries, taskID)
	if res != nil {
		return *res, nil
	}
	return d.probeStatus(ctx, in), nil
}

// registryFailure is the answer of a host whose registry could not be
// read: the engine's error when the engine was busy (the batch is tried
// again), else the host's 9199.
func registryFailure(t proc.Target, err error) (proc.HostResult, error) {
	err = fmt.Errorf("read the registry of %s: %w", workflows.HostWorkflowID(t.HostID()), err)
	if engine.Busy(err) {
		return proc.HostResult{}, err
	}
	return proc.HostResult{Code: proc.CodeInternal, Message: oneLine(err.Error())}, nil
}

// statusInput is the probe of item it by a host's registry entries, or the
// item's answer when the registry rules a probe out.
func statusInput(it proc.Item, entries []workflows.Entry, taskID string) (activities.HostOpInput, *proc.HostResult) {
	var entry workflows.Entry
	if it.Spec != nil {
		entry = workflows.Entry{Process: it.Process, Spec: *it.Spec}
	}
	found := false
	for _, e := range entries {
		if e.Process == it.Process {
			found = true
			if it.Spec == nil {
				entry = e
			} else {
				entry.Registration = e.Registration
			}
		}
	}
	if it.Spec == nil && !found {
		r := proc.Fail(proc.CodeNotRegistered, "process %s/%s is not registered on host %s; register it with register_proc_info",
			it.Process.Namespace, it.Process.Name, it.Target.HostID())
		return activities.HostOpInput{}, &r
	}
	spec := policies.WithDefaults(entry.Spec)
	// A hung host must fail alone, within its own probe's bound, never by
	// running its batch past the batch's deadline.
	spec.OpTimeout = policies.StatusProbeTimeout(spec.OpTimeout)
	return activities.HostOpInput{
		RequestID: taskID, Op: proc.OpStatus, Target: it.Target, Process: it.Process,
		Spec: spec, Registration: entry.Registration,
	}, nil
}

func (d *Dispatcher) probeStatus(ctx context.Context, in activities.HostOpInput) proc.HostResult {
	out, err := d.Acts.HostOp(ctx, in)
	if err != nil {
		return proc.HostResult{Code: proc.CodeInternal, Message: oneLine(err.Error())}
	}
	return out.Result
}
