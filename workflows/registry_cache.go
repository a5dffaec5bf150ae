package workflows

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// registryCache reads each host workflow's registry once per batch.
type registryCache struct {
	c     client.Client
	known *registryStore
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

type registryRead struct {
	once    sync.Once
	entries []Entry
	v       registryVersion
	err     error
}

func newRegistryCache(c client.Client, known *registryStore) *registryCache {
	return &registryCache{c: c, known: known, m: map[proc.HostID]*registryRead{}}
}

func (rc *registryCache) get(ctx context.Context, h proc.HostID) ([]Entry, registryVersion, error) {
	rc.mu.Lock()
	r, ok := rc.m[h]
	if !ok {
		r = &registryRead{}
		rc.m[h] = r
	}
	rc.mu.Unlock()
	r.once.Do(func() {
		r.entries, r.v, r.err = rc.read(ctx, HostWorkflowID(h))
	})
	return r.entries, r.v, r.err
}

// read returns a host workflow's registry. A query is a round trip through
// a worker, several times the cost of describing the workflow, so the
// registry last read is reused while the workflow's run and history length
// are those seen before that query: the registry is a function of the
// history, and a workflow that gained no event has the same registry.
func (rc *registryCache) read(ctx context.Context, id string) ([]Entry, registryVersion, error) {
	registryDescribes <- struct{}{}
	desc, err := rc.c.DescribeWorkflowExecution(ctx, id, "")
	<-registryDescribes
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return nil, registryVersion{}, nil // never registered anything
	case err != nil:
		return nil, registryVersion{}, fmt.Errorf("%s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if st := info.GetStatus(); st != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		h, _ := parseHostWorkflowID(id)
		return nil, registryVersion{}, &HostLostError{Host: h, Status: st}
	}
	v := registryVersion{run: info.GetExecution().GetRunId(), length: info.GetHistoryLength()}
	if entries, ok := rc.known.get(id, v); ok {
		return entries, v, nil
	}
	var entries []Entry
	registryQueries <- struct{}{}
	for attempt := 1; ; attempt++ {
		qctx, cancel := context.WithTimeout(ctx, policies.RegistryQueryTimeout)
		_, err = QueryOpen(qctx, rc.c, id, RegistryQuery, &entries)
		cancel()
		if err == nil || attempt == policies.RegistryQueryAttempts || ctx.Err() != nil || !timedOut(err) {
			break
		}
	}
	<-registryQueries
	if err != nil {
		return nil, registryVersion{}, err
	}
	// Stored under the version read before the query: any event since
	// makes the next describe differ, so a newer answer is never mistaken
	// for an older state, nor the reverse.
	rc.known.put(id, v, entries)
	return entries, v, nil
}

// timedOut reports whether a call failed by running out of time, on the
// client's side or the server's.
func timedOut(err error) bool {
	var de *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &de)
}

// registryVersion names one state of a host workflow.
type registryVersion struct {
	run    string
	length int64
}

// registryStore is the registries read so far, one per host workflow.
type registryStore struct {
	mu sync.Mutex
	m  map[string]storedRegistry
}

type storedRegistry struct {
	v       registryVersion
	entries []Entry
}

func (s *registryStore) get(id string, v registryVersion) ([]Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[id]
	if !ok || r.v != v {
		return nil, false
	}
	return r.entries, true
}

// latest is the registry read last for id, whatever its version.
func (s *registryStore) latest(id string) (registryVersion, []Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[id]
	return r.v, r.entries, ok
}

func (s *registryStore) put(id string, v registryVersion, entries []Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]storedRegistry{}
	}
	s.m[id] = storedRegistry{v: v, entries: entries}
}
