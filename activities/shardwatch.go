package activities

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
)

// ShardMember is one host workflow a shard watches, at the generation of
// its watch it last armed.
type ShardMember struct {
	Host string `json:"host"` // the host workflow's id
	Gen  int    `json:"gen"`
}

// ShardWatchInput names a shard's members; never their specs, which the
// activity asks each host workflow for, so the input stays small however
// many processes a host has.
type ShardWatchInput struct {
	Shard string `json:"shard"`
	// Epoch grows with every ShardWatch a shard starts: a newer one on
	// the same worker takes over from an older one at once.
	Epoch   int           `json:"epoch"`
	Members []ShardMember `json:"members"`
	// Renew ends a quiet shard watch after this long; zero means
	// policies.WatchRenew.
	Renew time.Duration `json:"renew,omitempty"`
}

// HostWatch is a host workflow's armed watch: what to poll, at which
// generation. Input is nil when the host has nothing armed.
type HostWatch struct {
	Gen   int         `json:"gen"`
	Input *WatchInput `json:"input,omitempty"`
}

// ShardEvents is what a shard watch tells a host workflow: events to
// decide on for one generation of its watch, or that its watch failed.
type ShardEvents struct {
	Gen    int            `json:"gen"`
	Events []WatchEvent   `json:"events,omitempty"`
	Zone   *policies.Zone `json:"zone,omitempty"`
	// Failed says why the host is not being watched, for its events.
	Failed string `json:"failed,omitempty"`
}

// HostWorkflows reaches host workflows for shard watches: the Temporal
// client lives with the workflows package.
type HostWorkflows interface {
	// WatchInput asks a host workflow for its armed watch; found is false
	// when the workflow is not running.
	WatchInput(ctx context.Context, host string) (w HostWatch, found bool, err error)
	// Report signals events to a host workflow; found is false when the
	// workflow is not running.
	Report(ctx context.Context, host string, ev ShardEvents) (found bool, err error)
}

// shardParallel bounds one shard watch's polls and queries in flight, over
// the worker's pooled connections.
const shardParallel = 32

// hostWatch is one host's watch as this worker keeps it across shard
// watches: a shard watch started again (its membership changed) reuses it
// while the generation is the same, with its limit and CPU state.
type hostWatch struct {
	mu  sync.Mutex
	gen int
	in  WatchInput
	w   *watcher
	// reported: this generation's events were delivered; the host polls
	// no more until it arms a new generation.
	reported bool
	// polled is when this worker last polled the host.
	polled time.Time
}

// shardWorker is what a worker keeps for shard watches.
type shardWorker struct {
	mu      sync.Mutex
	hosts   map[string]*hostWatch
	members map[string][]string // shard -> its hosts, at its latest watch
	running map[string]*shardRun
	// latest is the newest epoch of each shard seen here: an older one
	// (a retry that raced its cancellation) never runs after it.
	latest map[string]int
	// removed holds the hosts whose removal from the inventory was
	// reported to their host workflows: they are told once, not at every
	// arm, while the shard waits for them to come back.
	removed map[string]bool
	// handoffs holds what hosts armed on this worker (HandOffWatch), ended
	// the last generation each host disarmed after here (EndWatch).
	handoffs map[string]armedWatch
	ended    map[string]int
}

type shardRun struct {
	epoch  int
	cancel context.CancelFunc
	done   chan struct{}
}

func (a *Activities) shardWorker() *shardWorker {
	a.shardOnce.Do(func() {
		a.shards = &shardWorker{hosts: map[string]*hostWatch{}, members: map[string][]string{}, running: map[string]*shardRun{},
			latest: map[string]int{}, removed: map[string]bool{}, handoffs: map[string]armedWatch{},
			ended: map[string]int{}}
	})
	return a.shards
}

// takeOver makes this run the shard's only one on this worker: an older
// run is cancelled and waited for, so no host is polled twice and no
// watcher state is shared. A newer run already there wins instead.
func (s *shardWorker) takeOver(ctx context.Context, in ShardWatchInput, cancel context.CancelFunc) (*shardRun, bool) {
	s.mu.Lock()
	if s.latest[in.Shard] > in.Epoch {
		s.mu.Unlock()
		return nil, false
	}
	s.latest[in.Shard] = in.Epoch
	old := s.running[in.Shard]
	run := &shardRun{epoch: in.Epoch, cancel: cancel, done: make(chan struct{})}
	s.running[in.Shard] = run
	keep := map[string]bool{}
	for _, m := range in.Members {
		keep[m.Host] = true
	}
	for _, h := range s.members[in.Shard] {
		if !keep[h] {
			delete(s.hosts, h)
			delete(s.removed, h)
		}
	}
	hosts := make([]string, 0, len(in.Members))
	for _, m := range in.Members {
		hosts = append(hosts, m.Host)
	}
	s.members[in.Shard] = hosts
	s.mu.Unlock()
	if old != nil {
		old.cancel()
		select {
		case <-old.done:
		case <-ctx.Done():
		case <-time.After(policies.WatchPollTimeout + 5*time.Second):
		}
	}
	return run, true
}

func (s *shardWorker) finish(shard string, run *shardRun) {
	s.mu.Lock()
	if s.running[shard] == run {
		delete(s.running, shard)
	}
	s.mu.Unlock()
	close(run.done)
}

// cached is the host's watch at gen or later, if this worker has it.
func (s *shardWorker) cached(host string, gen int) *hostWatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hw := s.hosts[host]; hw != nil && hw.gen >= gen {
		return hw
	}
	return nil
}

func (s *shardWorker) put(host string, hw *hostWatch) {
	s.mu.Lock()
	if old := s.hosts[host]; old == nil || old.gen <= hw.gen {
		s.hosts[host] = hw
	}
	s.mu.Unlock()
}

// ShardWatch polls every member host of a shard, each with one exec per
// poll over the pooled connections, and signals a host workflow only when
// it needs a decision; that host is then left alone until it arms a new
// generation. However many hosts it watches, it heartbeats as one
// activity: that is what makes quiet supervision cheap for the server.
func (a *Activities) ShardWatch(ctx context.Context, in ShardWatchInput) error {
	if a.Hosts == nil {
		return temporal.NewNonRetryableApplicationError("this worker cannot reach host workflows", "NoHostWorkflows", nil)
	}
	renew := in.Renew
	if renew <= 0 {
		renew = policies.WatchRenew
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer keepAlive(ctx)()
	sw := a.shardWorker()
	run, ok := sw.takeOver(ctx, in, cancel)
	if !ok {
		return nil // a newer watch of the shard runs here already
	}
	defer sw.finish(in.Shard, run)
	var stopping <-chan struct{}
	if activity.IsActivity(ctx) {
		stopping = activity.GetWorkerStopChannel(ctx)
	}
	sem := make(chan struct{}, shardParallel)
	var wg sync.WaitGroup
	for i, m := range in.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Spread the first polls over a second per 32 hosts, so a
			// shard's hosts are not polled all at once every interval.
			if !sleepCtx(ctx, time.Duration(i)*time.Second/shardParallel) {
				return
			}
			a.watchMember(ctx, sw, m, sem)
		}()
	}
	var err error
	select {
	case <-ctx.Done():
		// Cancelled by its workflow, or taken over by a newer watch of
		// the shard on this worker: that one is the shard's now.
		err = parent.Err()
	case <-stopping:
		// A stopping worker hands the shard back at once, as a retryable
		// failure: another worker takes it up within a second.
		err = temporal.NewApplicationError("the worker is stopping: another takes the shard watch up", "WorkerStopping")
	case <-time.After(renew):
	}
	cancel()
	wg.Wait()
	return err
}

// watchMember finds a member's armed watch, then polls the host until it
// needs a decision and that is reported.
func (a *Activities) watchMember(ctx context.Context, sw *shardWorker, m ShardMember, sem chan struct{}) {
	if sw.hasEnded(m.Host, m.Gen) {
		return
	}
	hw := sw.cached(m.Host, m.Gen)
	// A host workflow that does not answer (its worker is lost, or it is
	// busy) is asked again, less and less often.
	for backoff := 5 * time.Second; hw == nil; backoff = min(2*backoff, time.Minute) {
		if hw = a.fetchWatch(ctx, m, sem); hw == nil && !sleepCtx(ctx, backoff) {
			return
		}
	}
	hw.mu.Lock()
	defer hw.mu.Unlock()
	interval := hw.in.Interval
	if interval <= 0 {
		interval = policies.DefaultPollInterval
	}
	// A shard watch started again (its membership changed) polls a host
	// it already knows when that host's poll is due, not at once: while
	// hosts arm one after another, the shard starts again every few
	// seconds, and each start would poll every member.
	if !hw.polled.IsZero() && !sleepCtx(ctx, time.Until(hw.polled.Add(interval))) {
		return
	}
	for !hw.reported && !sw.hasEnded(m.Host, hw.gen) {
		hw.polled = time.Now()
		ev, gone := a.pollOrPause(ctx, sw, m.Host, hw, sem)
		if sw.hasEnded(m.Host, hw.gen) {
			break
		}
		if len(ev.Events) > 0 || ev.Zone != nil || ev.Failed != "" {
			// A host workflow that is gone needs nothing more either.
			if _, err := a.Hosts.Report(ctx, m.Host, ev); err == nil {
				hw.reported = true
				sw.setRemoved(m.Host, gone)
				return
			}
		}
		if !sleepCtx(ctx, interval) {
			return
		}
	}
}

// pollOrPause polls a member host that is in the inventory. One that is
// not (it was removed by a reload) is not polled: its host workflow is told
// once, through the failure path, and the host is looked up again each
// interval until it is back. gone reports the removal in ev.
func (a *Activities) pollOrPause(ctx context.Context, sw *shardWorker, member string, hw *hostWatch, sem chan struct{}) (ev ShardEvents, gone bool) {
	id := hw.in.Target.HostID()
	host, known := a.Inventory.Lookup(id)
	switch {
	case !known && sw.wasRemoved(member):
		return ShardEvents{}, false
	case !known:
		return ShardEvents{Gen: hw.gen, Failed: fmt.Sprintf("host %s was removed from the inventory; its registry stays, and its supervision resumes when it is back", id)}, true
	}
	sw.setRemoved(member, false)
	if hw.w == nil { // armed while the host was not in the inventory
		hw.w = newWatcher(hw.in, platformFor(host))
	}
	return a.pollMember(ctx, hw, host, sem), false
}

func (s *shardWorker) wasRemoved(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removed[host]
}

func (s *shardWorker) setRemoved(host string, removed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if removed {
		s.removed[host] = true
	} else {
		delete(s.removed, host)
	}
}

// fetchWatch asks the host workflow for its armed watch. A host with
// nothing armed, or gone, is not polled (it is left as reported) and not
// cached: its next arm starts the shard watch again. Nil: no answer.
func (a *Activities) fetchWatch(ctx context.Context, m ShardMember, sem chan struct{}) *hostWatch {
	if in, ok := a.shardWorker().takeHandoff(m.Host, m.Gen); ok {
		return a.keepWatch(m.Host, m.Gen, in)
	}
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, policies.RegistryQueryTimeout)
	got, found, err := a.Hosts.WatchInput(qctx, m.Host)
	cancel()
	<-sem
	switch {
	case err != nil:
		return nil
	case found && got.Gen < m.Gen:
		// The host's arm of m.Gen is not in its state yet: the workflow
		// task that armed is under way, or was lost with a server restart
		// and runs again, arming the same generation, which starts no new
		// watch. Asked again.
		return nil
	case !found || got.Input == nil:
		// Gone, or decided on: a next arm starts the shard watch again.
		return &hostWatch{gen: m.Gen, reported: true}
	}
	return a.keepWatch(m.Host, got.Gen, *got.Input)
}

// keepWatch keeps a member host's watch of generation gen, armed with in.
func (a *Activities) keepWatch(member string, gen int, in WatchInput) *hostWatch {
	hw := &hostWatch{gen: gen, in: in}
	if host, ok := a.Inventory.Lookup(in.Target.HostID()); ok {
		hw.w = newWatcher(hw.in, platformFor(host))
	}
	a.shardWorker().put(member, hw)
	return hw
}

// pollMember runs one poll of a member host; an unreachable host says
// nothing, and is polled again.
func (a *Activities) pollMember(ctx context.Context, hw *hostWatch, host inventory.Host, sem chan struct{}) ShardEvents {
	if hw.in.TimeZone != "" && hw.w.crontab && hw.w.loc == nil {
		loc, err := LoadZone(hw.in.TimeZone)
		if err != nil {
			return ShardEvents{Gen: hw.gen, Failed: fmt.Sprintf("supervise_timezone %q: %v", hw.in.TimeZone, err)}
		}
		hw.w.loc = loc
	}
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return ShardEvents{}
	}
	cmd := hw.w.pollScript(policies.HealthCheckTimeout)
	cmd.Timeout = policies.WatchPollTimeout
	res, err := a.Runner.Run(ctx, host, cmd)
	<-sem
	if err != nil || res.ExitCode != 0 || ctx.Err() != nil {
		return ShardEvents{}
	}
	events, zone := hw.w.observe(string(res.Stdout)), hw.w.zoneChange()
	return ShardEvents{Gen: hw.gen, Events: events, Zone: zone}
}

// sleepCtx waits d, or reports false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
