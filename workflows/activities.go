package workflows

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

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

	// known keeps each registry read by Status with the host workflow's
	// state it came from, so the next status op reuses it while that state
	// is unchanged.
	known registryStore
}

// DispatchInput is one Operate workflow's items to hand out.
type DispatchInput struct {
	ReplyTo string       `json:"reply_to"`
	TaskID  string       `json:"task_id"`
	Op      proc.OpType  `json:"op_type"`
	Manage  bool         `json:"manage,omitempty"`
	Items   []proc.Item  `json:"items"`
	Offset  int          `json:"offset"`
	Files   *proc.FileOp `json:"files,omitempty"`
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
	sem := make(chan struct{}, dispatchParallel)
	var wg sync.WaitGroup
	for i, it := range in.Items {
		global := in.Offset + i
		if _, ok := d.Inventory.Lookup(it.Target.HostID()); !ok {
			out.Answered = append(out.Answered, HostReply{Index: global, Result: unknownHost(it.Target)})
			continue
		}
		req := HostRequest{
			RequestID: fmt.Sprintf("%s#%d", in.TaskID, global), ReplyTo: in.ReplyTo, Index: global,
			Op: in.Op, Target: it.Target, Process: it.Process, Spec: it.Spec, Manage: in.Manage,
			Supervision: &d.Supervision, Files: in.Files,
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			id := it.Target.HostID()
			_, err := d.Client.SignalWithStartWorkflow(ctx, HostWorkflowID(id), OpSignal, req, client.StartWorkflowOptions{
				ID: HostWorkflowID(id), TaskQueue: d.TaskQueue,
				WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			}, HostWorkflowName, HostState{Host: id, Supervision: d.Supervision})
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				out.Undelivered = append(out.Undelivered, i)
				mu.Unlock()
			}
		}(i)
		if i%100 == 0 {
			activity.RecordHeartbeat(ctx, i)
		}
	}
	wg.Wait()
	// A transient failure is retried whole; duplicates are dropped by hosts.
	if firstErr != nil && activity.GetInfo(ctx).Attempt < 3 {
		return DispatchOutput{}, firstErr
	}
	return out, nil
}

// unknownHost answers an item whose host the inventory does not have: by
// the agent id the caller sent when nothing mapped it to a host.
func unknownHost(t proc.Target) proc.HostResult {
	if !t.Resolved() {
		return proc.Fail(proc.CodeUnknownHost, "agent id %q is not in the inventory (give its host agent_id, or send <bk_cloud_id>:<ip>)", t.AgentID)
	}
	return proc.Fail(proc.CodeUnknownHost, "host bk_cloud_id=%d ip=%s is not in the inventory", t.CloudID, t.IP)
}

// StatusInput is a batch of status items probed by one activity.
type StatusInput struct {
	TaskID string      `json:"task_id"`
	Items  []proc.Item `json:"items"`
	Offset int         `json:"offset"`
}

// Status probes a batch of items directly, without their host workflows: a
// read needs no serialising, and one activity for many hosts keeps the
// engine's cost per host small. Registered specs are read from each host
// workflow's registry query, once per host.
func (d *Dispatcher) Status(ctx context.Context, in StatusInput) ([]HostReply, error) {
	// Heartbeat while registries are read, too: on a new worker, reading a
	// hundred of them can outlast the heartbeat timeout before any probe
	// (which heartbeats) has begun.
	defer activities.KeepAlive(ctx)()
	out := make([]HostReply, len(in.Items))
	registries := newRegistryCache(d.Client, &d.known)
	sem := make(chan struct{}, statusParallel)
	var wg sync.WaitGroup
	var done atomic.Int64
	for i, it := range in.Items {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, it proc.Item) {
			defer func() { <-sem; wg.Done() }()
			out[i] = HostReply{Index: in.Offset + i, Result: d.statusOne(ctx, registries, in.TaskID, it)}
			if n := done.Add(1); n%50 == 0 {
				activity.RecordHeartbeat(ctx, n)
			}
		}(i, it)
	}
	wg.Wait()
	return out, nil
}

// statusParallel bounds concurrent probes in one status batch; the SSH pool
// further bounds sessions per host.
const statusParallel = 256

func (d *Dispatcher) statusOne(ctx context.Context, registries *registryCache, taskID string, it proc.Item) proc.HostResult {
	host, ok := d.Inventory.Lookup(it.Target.HostID())
	if !ok {
		return unknownHost(it.Target)
	}
	// A cold worker has no connection yet: the handshake overlaps the
	// registry query instead of following it. A failed dial is not
	// cached, so the probe's own Run reports it.
	if c, ok := d.Acts.Runner.(connector); ok {
		go func() { _ = c.Connect(ctx, host) }()
	}
	// While the registry is read, probe by the one read last time: status
	// only reads, so a probe made by a registry that has since changed is
	// simply dropped.
	id := HostWorkflowID(it.Target.HostID())
	var early chan proc.HostResult
	var stopEarly context.CancelFunc = func() {}
	v0, known, ok := d.known.latest(id)
	if ok {
		if in, res := statusInput(it, known, taskID); res == nil {
			var ectx context.Context
			ectx, stopEarly = context.WithCancel(ctx)
			early = make(chan proc.HostResult, 1)
			go func() { early <- d.probeStatus(ectx, in) }()
		}
	}
	defer stopEarly()
	entries, v, err := registries.get(ctx, it.Target.HostID())
	if err == nil && early != nil && v == v0 {
		return <-early
	}
	if early != nil {
		stopEarly()
		<-early
	}
	if err != nil {
		return proc.HostResult{Code: proc.CodeInternal, Message: oneLine(fmt.Sprintf("read the registry of %s: %v", id, err))}
	}
	in, res := statusInput(it, entries, taskID)
	if res != nil {
		return *res
	}
	return d.probeStatus(ctx, in)
}

// statusInput is the probe of item it by a host's registry entries, or the
// item's answer when the registry rules a probe out.
func statusInput(it proc.Item, entries []Entry, taskID string) (activities.HostOpInput, *proc.HostResult) {
	var entry Entry
	if it.Spec != nil {
		entry = Entry{Process: it.Process, Spec: *it.Spec}
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

// connector is a Runner that can connect ahead of its first command.
type connector interface {
	Connect(ctx context.Context, host inventory.Host) error
}

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
	if info.GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, registryVersion{}, nil // as QueryOpen answers for a closed workflow
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
