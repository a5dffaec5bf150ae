package workflows

import (
	"reflect"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/proc"
)

// Bounds that keep the memo small whatever a host's history: a memo is
// stored with every visibility record of the workflow.
const (
	// MaxDigestProcs is the most processes a memo lists; a host with more
	// says how many it left out, and readers ask its registry instead.
	MaxDigestProcs = 256
	// maxDigestRestarts is the most restart times kept per process.
	maxDigestRestarts = 16
	// RestartWindow is how far back restarts are counted.
	RestartWindow = 24 * time.Hour
)

// Digest is a host's registry in brief.
type Digest struct {
	Procs []ProcDigest `json:"procs"`
	// Omitted counts processes past MaxDigestProcs left out of Procs.
	Omitted int `json:"omitted,omitempty"`
	// WatchFailedAt is when supervision last could not poll the host. A
	// poll that works again records nothing, so readers compare it with
	// what was seen since.
	WatchFailedAt int64 `json:"wf,omitempty"`
}

// Process states as drover last knew them.
const (
	StateRunning = "running"
	StateStopped = "stopped"
	StateUnknown = "unknown"
)

// ProcDigest is one registered process in brief. Times are unix seconds.
type ProcDigest struct {
	Namespace  string `json:"ns"`
	Name       string `json:"n"`
	SupplierID int    `json:"sp,omitempty"`
	Managed    bool   `json:"m,omitempty"`
	// Expected: it should be running (started and not stopped since).
	Expected bool `json:"e,omitempty"`
	// Actual is StateRunning or StateStopped as last seen at SeenAt, or
	// empty when drover has not seen it.
	Actual string `json:"a,omitempty"`
	Pid    int    `json:"p,omitempty"`
	SeenAt int64  `json:"t,omitempty"`
	// Supervised: managed, polled every supervise_interval and not given
	// up on, so Actual is current: a death would have been reported.
	Supervised bool `json:"s,omitempty"`
	// GaveUp: supervision ran out of start_retries.
	GaveUp bool `json:"g,omitempty"`
	// RetryAt is when a failed restart is tried again.
	RetryAt int64 `json:"b,omitempty"`
	// Restarts are the times of restart attempts within RestartWindow of
	// the digest, newest last, at most maxDigestRestarts.
	Restarts    []int64 `json:"r,omitempty"`
	LastEvent   string  `json:"k,omitempty"`
	LastEventAt int64   `json:"kt,omitempty"`
}

// Sighting is a process as an op or supervision last saw it.
type Sighting struct {
	Alive bool      `json:"alive"`
	Pid   int       `json:"pid,omitempty"`
	At    time.Time `json:"at"`
}

// saw records what an op's result says of the process: only results that
// establish liveness do (an unreachable host says nothing).
func (e *Entry) saw(out activities.HostOpOutput, at time.Time) {
	switch out.Result.Code {
	case proc.CodeSuccess, proc.CodeAlreadyRunning, proc.CodeNotRunning, proc.CodePostCheck:
		e.Seen = &Sighting{Alive: out.Alive, At: at}
		if out.Alive {
			e.Seen.Pid = out.Pid
		}
	}
}

// isRestart tells which events are restart attempts.
func isRestart(kind string) bool {
	return kind == EventRestartSuccess || kind == EventRestartFailed
}

// DigestOf summarises entries and their events as of now.
func DigestOf(entries []Entry, events []Event, now time.Time) Digest {
	d := Digest{Procs: []ProcDigest{}}
	index := map[proc.ProcessID]int{}
	for _, e := range entries {
		if len(d.Procs) == MaxDigestProcs {
			d.Omitted++
			continue
		}
		p := ProcDigest{Namespace: e.Process.Namespace, Name: e.Process.Name, SupplierID: e.SupplierID,
			Managed: e.Managed, Expected: e.Expected || e.Managed, GaveUp: e.Cancelled,
			Supervised: e.Managed && !e.Cancelled && e.RetryAt.IsZero()}
		if e.Seen != nil {
			p.Actual, p.SeenAt = StateStopped, e.Seen.At.Unix()
			if e.Seen.Alive {
				p.Actual, p.Pid = StateRunning, e.Seen.Pid
			}
		}
		if !e.RetryAt.IsZero() {
			p.RetryAt = e.RetryAt.Unix()
		}
		index[e.Process] = len(d.Procs)
		d.Procs = append(d.Procs, p)
	}
	since := now.Add(-RestartWindow)
	for _, ev := range events {
		if ev.Kind == EventWatchFailed {
			d.WatchFailedAt = ev.Time.Unix()
		}
		i, ok := index[ev.Process]
		if !ok {
			continue
		}
		p := &d.Procs[i]
		p.LastEvent, p.LastEventAt = ev.Kind, ev.Time.Unix()
		if isRestart(ev.Kind) && ev.Time.After(since) {
			p.Restarts = append(p.Restarts, ev.Time.Unix())
			if len(p.Restarts) > maxDigestRestarts {
				p.Restarts = p.Restarts[1:]
			}
		}
	}
	return d
}

// publish puts the registry's digest in the memo when it changed. It is
// called before the workflow blocks (an op's activity, a reply, the wait),
// so the memo is current whenever the host is idle or busy.
func (h *host) publish(ctx workflow.Context) {
	if !h.has(ctx, VersionRegistryMemo) {
		return
	}
	memo := map[string]any{}
	d := DigestOf(h.Entries, h.Events, workflow.Now(ctx))
	if h.published == nil || !reflect.DeepEqual(*h.published, d) {
		memo[RegistryMemo] = d
	}
	var specs []RegistryEntry
	if h.has(ctx, VersionRegistrySpecs) {
		specs = RegistryOf(h.Entries)
		if h.publishedSpecs == nil || !reflect.DeepEqual(*h.publishedSpecs, specs) {
			memo[SpecsMemo] = specs
		}
	}
	if len(memo) == 0 {
		return
	}
	if err := workflow.UpsertMemo(ctx, memo); err != nil {
		workflow.GetLogger(ctx).Warn("registry memo not updated", "error", err)
		return
	}
	h.published = &d
	if _, ok := memo[SpecsMemo]; ok {
		h.publishedSpecs = &specs
	}
}

// RegistryEntry is one registered process as the specs memo holds it:
// what a status probe of it needs.
type RegistryEntry struct {
	Process    proc.ProcessID `json:"process"`
	Spec       proc.Spec      `json:"spec"`
	SupplierID int            `json:"bk_supplier_id,omitempty"`
	proc.Registration
}

// RegistryOf is entries as the specs memo holds them, at most
// MaxDigestProcs; a host with more is read by query.
func RegistryOf(entries []Entry) []RegistryEntry {
	out := make([]RegistryEntry, 0, min(len(entries), MaxDigestProcs))
	for _, e := range entries {
		if len(out) == MaxDigestProcs {
			break
		}
		out = append(out, RegistryEntry{Process: e.Process, Spec: e.Spec, SupplierID: e.SupplierID, Registration: e.Registration})
	}
	return out
}
