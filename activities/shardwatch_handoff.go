package activities

// An arm runs as a local activity on the worker of the host workflow that
// arms, and a shard's watch usually runs on that same worker. The arm
// then leaves what it armed here, and the watch reads it instead of
// asking the host workflow by a query: after a fleet op, thousands of
// hosts arm at once, and each query is a round trip through the server
// and a workflow task of the host's worker. A watch on another worker
// finds nothing here and queries, as before.
//
// A disarm, as a stop's, is left here too: the worker's watch of the
// generations it ends then neither polls the host nor reports what it saw
// (the process the stop ended), which the host would refuse as stale only
// after a workflow task of its own, while the shard's membership waits to
// be renewed.

// armedWatch is what a host armed at a generation.
type armedWatch struct {
	gen int
	in  WatchInput
}

// HandOffWatch keeps what host armed at gen (not 0) for a's shard
// watches. One per host, the latest: an arm whose watch runs on another
// worker is never taken, and is replaced by the host's next arm. A
// function, not a method: every method of Activities is registered as an
// activity.
func HandOffWatch(a *Activities, host string, gen int, in WatchInput) {
	s := a.shardWorker()
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.handoffs[host]; !ok || old.gen < gen {
		s.handoffs[host] = armedWatch{gen: gen, in: in}
	}
}

// EndWatch tells a's shard watches that host disarmed after arming gen:
// no generation up to gen is watched here any more.
func EndWatch(a *Activities, host string, gen int) {
	s := a.shardWorker()
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.handoffs[host]; ok && old.gen <= gen {
		delete(s.handoffs, host)
	}
	s.ended[host] = max(s.ended[host], gen)
}

// hasEnded reports whether host disarmed after arming gen, on this worker.
func (s *shardWorker) hasEnded(host string, gen int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended[host] >= gen
}

// takeHandoff takes what host armed at exactly gen, once. One of an older
// generation is dropped; a newer one waits for its own membership.
func (s *shardWorker) takeHandoff(host string, gen int) (WatchInput, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.handoffs[host]
	switch {
	case !ok || h.gen > gen:
		return WatchInput{}, false
	case h.gen < gen:
		delete(s.handoffs, host)
		return WatchInput{}, false
	}
	delete(s.handoffs, host)
	return h.in, true
}
