package workflows

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.temporal.io/sdk/activity"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/proc"
)

// batchActivity is the activity each batch of a read task runs: the host
// check's, or status's probes.
func (op *operation) batchActivity() string {
	if op.in.Op == proc.OpCheck {
		return CheckActivity
	}
	return StatusActivity
}

// Check checks a batch of hosts (OpCheck) as Status probes them: directly,
// one activity for the batch, and without touching host workflows. The
// accounts each host is checked for come from the specs memos its host
// workflow publishes, read with one listing per batch.
func (d *Dispatcher) Check(ctx context.Context, in StatusInput) ([]HostReply, error) {
	defer activities.KeepAlive(ctx)()
	var hosts []proc.HostID
	seen := map[proc.HostID]bool{}
	for _, it := range in.Items {
		if h := it.Target.HostID(); !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	registries := newRegistryCache(ctx, d.Client, d.DataConverter, hosts)
	out := make([]HostReply, len(in.Items))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(statusParallel, len(in.Items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = HostReply{Index: in.Offset + i, Result: d.checkOne(ctx, registries, in.Items[i].Target)}
			}
		}()
	}
	for i := range in.Items {
		next <- i
		if i%50 == 49 {
			activity.RecordHeartbeat(ctx, i)
		}
	}
	close(next)
	wg.Wait()
	// As for status: a batch whose own context ended answers nothing, and
	// is tried again.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkOne checks one host for its login and the accounts of its
// registered specs, and of its inventory entry.
func (d *Dispatcher) checkOne(ctx context.Context, registries *registryCache, t proc.Target) proc.HostResult {
	host, ok := d.Inventory.Lookup(t.HostID())
	if !ok {
		return unknownHost(t)
	}
	entries, err := registries.whole(ctx, t.HostID())
	var lost *HostLostError
	if err != nil && !errors.As(err, &lost) {
		return proc.HostResult{Code: proc.CodeInternal, Message: oneLine(fmt.Sprintf("read the registry of %s: %v", HostWorkflowID(t.HostID()), err))}
	}
	var accounts []string
	if host.Account != "" {
		accounts = append(accounts, host.Account)
	}
	for _, e := range entries {
		accounts = append(accounts, e.Spec.Account)
	}
	res, err := d.Acts.CheckHost(ctx, activities.CheckInput{Target: t, Accounts: accounts})
	if err != nil {
		return proc.HostResult{Code: proc.CodeInternal, Message: oneLine(err.Error())}
	}
	if lost != nil && res.Code == proc.CodeSuccess {
		// Reached, but its registry is out of reach: no op would run.
		r := hostLost(lost.Host, lost.Status)
		r.Message, r.Content = r.Message+"; "+res.Message, res.Content
		return r
	}
	return res
}

// whole is host h's whole registry: from the listing when its memo held
// every entry, else read from the host workflow.
func (rc *registryCache) whole(ctx context.Context, h proc.HostID) ([]Entry, error) {
	if entries, ok := rc.listed[h]; ok && len(entries) < MaxDigestProcs {
		return entries, nil
	}
	// No process is named "": get reads the registry itself.
	return rc.get(ctx, h, proc.ProcessID{})
}
