package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/hostloss"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// registryCache reads the registries of one status batch: every listed
// host workflow's from its specs memo, listed with other batches' hosts, and
// only a host the listing does not answer for by describe and query.
type registryCache struct {
	c      client.Client
	lister *registryLister
	listed map[proc.HostID][]workflows.Entry
	// until ends the tries of the batch's registry reads on a busy server
	// (policies.RegistryReadBudget).
	until time.Time
	mu    sync.Mutex
	m     map[proc.HostID]*registryRead
}

// registryQueries bounds the registry queries one worker has in flight:
// each is a workflow task on some worker, and a thousand at once only
// queue up behind each other until they time out. Describes involve no
// worker and take a wider bound.
var (
	registryQueries   = make(chan struct{}, 32)
	registryDescribes = make(chan struct{}, 128)
)

// registryReadBudget is policies.RegistryReadBudget; tests shorten it.
var registryReadBudget = policies.RegistryReadBudget

type registryRead struct {
	once    sync.Once
	entries []workflows.Entry
	err     error
}

// newRegistryCache lists the running host workflows of hosts with their
// memos, tried again for half the read budget while the server is busy. A
// listing that fails leaves every host to its own read.
func newRegistryCache(ctx context.Context, c client.Client, lister *registryLister, hosts []proc.HostID) *registryCache {
	rc := &registryCache{c: c, lister: lister, m: map[proc.HostID]*registryRead{}, until: time.Now().Add(registryReadBudget)}
	_ = engine.WhileBusy(ctx, registryReadBudget/2, func(ctx context.Context) error {
		var err error
		rc.listed, err = lister.registries(ctx, hosts)
		return err
	})
	return rc
}

// get is host h's registry. A host whose memo does not list the process
// asked for is read again by query: its memo may be behind a register
// that has just ended, or cut short (MaxDigestProcs). A zero p asks for
// the whole registry.
func (rc *registryCache) get(ctx context.Context, h proc.HostID, p proc.ProcessID) ([]workflows.Entry, error) {
	if entries, ok := rc.listed[h]; memoAnswers(entries, ok, p) {
		return entries, nil
	}
	rc.mu.Lock()
	r, ok := rc.m[h]
	if !ok {
		r = &registryRead{}
		rc.m[h] = r
	}
	rc.mu.Unlock()
	r.once.Do(func() {
		r.entries, r.err = rc.read(ctx, h, p)
	})
	return r.entries, r.err
}

// whole is host h's whole registry: from the listing when its memo held
// every entry, else read from the host workflow.
func (rc *registryCache) whole(ctx context.Context, h proc.HostID) ([]workflows.Entry, error) {
	return rc.get(ctx, h, proc.ProcessID{})
}

// memoAnswers reports whether a listed memo's entries (listed: the host
// was in the listing) answer for process p: the memo holds every entry
// and names p, or p is zero and the whole registry is asked for.
func memoAnswers(entries []workflows.Entry, listed bool, p proc.ProcessID) bool {
	if !listed || len(entries) >= workflows.MaxDigestProcs {
		return false
	}
	if p == (proc.ProcessID{}) {
		return true
	}
	for _, e := range entries {
		if e.Process == p {
			return true
		}
	}
	return false
}

// read returns host h's registry by describe and query, tried again while
// the engine is busy, until the batch's RegistryReadBudget ends. Before
// each query tried again the host is listed once more: a host that was
// between runs (continued as new) when the batch listed it is listed once
// its new run is visible, which needs no worker. Only a host whose
// workflow answers neither way within the budget returns the error.
func (rc *registryCache) read(ctx context.Context, h proc.HostID, p proc.ProcessID) ([]workflows.Entry, error) {
	id := workflows.HostWorkflowID(h)
	var desc *workflowservice.DescribeWorkflowExecutionResponse
	err := engine.WhileBusy(ctx, time.Until(rc.until), func(ctx context.Context) error {
		registryDescribes <- struct{}{}
		defer func() { <-registryDescribes }()
		var err error
		desc, err = rc.c.DescribeWorkflowExecution(ctx, id, "")
		return err
	})
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return nil, nil // never registered anything
	case err != nil:
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, &hostloss.Error{Host: h, Status: st}
	}
	for {
		entries, err := rc.query(ctx, id)
		if err == nil || ctx.Err() != nil || !engine.TimedOut(err) {
			return entries, err
		}
		if listed, ok := rc.relist(ctx, h, p); ok {
			return listed, nil
		}
		if time.Now().Add(policies.RegistryQueryTimeout).After(rc.until) {
			return nil, err
		}
	}
}

// query is one try of a host workflow's registry query.
func (rc *registryCache) query(ctx context.Context, id string) ([]workflows.Entry, error) {
	registryQueries <- struct{}{}
	defer func() { <-registryQueries }()
	qctx, cancel := context.WithTimeout(ctx, policies.RegistryQueryTimeout)
	defer cancel()
	var entries []workflows.Entry
	if _, err := engine.QueryOpenOnce(qctx, rc.c, id, workflows.RegistryQuery, &entries); err != nil {
		return nil, err
	}
	return entries, nil
}

// relist is host h's registry from a listing of it alone, when its memo
// now answers for p (memoAnswers).
func (rc *registryCache) relist(ctx context.Context, h proc.HostID, p proc.ProcessID) ([]workflows.Entry, bool) {
	listed, err := rc.lister.registries(ctx, []proc.HostID{h})
	entries, ok := listed[h]
	if err != nil || !memoAnswers(entries, ok, p) {
		return nil, false
	}
	return entries, true
}
