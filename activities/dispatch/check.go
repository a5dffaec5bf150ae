package dispatch

import (
	"context"
	"errors"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/internal/hostloss"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// Check checks a batch of hosts (OpCheck) as Status probes them: directly,
// one activity for the batch, and without touching host workflows. The
// accounts each host is checked for come from the specs memos its host
// workflow publishes, listed as Status lists them.
func (d *Dispatcher) Check(ctx context.Context, in workflows.StatusInput) ([]workflows.HostReply, error) {
	ctx, outlast := activities.OutlastLostHeartbeats(ctx)
	defer outlast()
	defer activities.KeepAlive(ctx)()
	registries := newRegistryCache(ctx, d.Client, d.registryLister(), batchHosts(in.Items))
	out, err := answerEach(ctx, in, func(it proc.Item) (proc.HostResult, error) {
		return d.checkOne(ctx, registries, it.Target)
	})
	d.signalAll(ctx, out)
	return out, err
}

// checkOne checks one host for its login and the accounts of its
// registered specs, and of its inventory entry.
func (d *Dispatcher) checkOne(ctx context.Context, registries *registryCache, t proc.Target) (proc.HostResult, error) {
	host, ok := d.Inventory.Lookup(t.HostID())
	if !ok {
		return unknownHost(t), nil
	}
	entries, err := registries.whole(ctx, t.HostID())
	var lost *hostloss.Error
	if err != nil && !errors.As(err, &lost) {
		return registryFailure(t, err)
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
		return proc.HostResult{Code: proc.CodeInternal, Message: oneLine(err.Error())}, nil
	}
	if lost != nil && res.Code == proc.CodeSuccess {
		// Reached, but its registry is out of reach: no op would run.
		r := hostloss.Answer(lost.Host, lost.Status)
		r.Message, r.Content = r.Message+"; "+res.Message, res.Content
		return r, nil
	}
	return res, nil
}
