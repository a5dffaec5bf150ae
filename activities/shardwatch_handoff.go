package activities

// An arm runs as a local activity on the worker of the host workflow that
// arms, and a shard's watch usually runs on that same worker. The arm
// then leaves what it armed here, and the watch reads it instead of
// asking the host workflow by a query: after a fleet op, thousands of
// hosts arm at once, and each query is a round trip through the server
// and a workflow task of the host's worker. A watch on another worker
// finds nothing here and queries, as before.

// armedWatch is what a host armed at a generation.
type armedWatch struct {
	gen int
	in  WatchInput
}

// HandOffWatch keeps what host armed at gen for a's shard watches; a
// disarm (gen 0) drops it. One per host, the latest: an arm whose watch
// runs on another worker is never taken, and is replaced by the host's
// next arm. A function, not a method: every method of Activities is
// registered as an activity.
func HandOffWatch(a *Activities, host string, gen int, in WatchInput) {
	s := a.shardWorker()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch old, ok := s.handoffs[host]; {
	case gen == 0:
		delete(s.handoffs, host)
	case !ok || old.gen < gen:
		s.handoffs[host] = armedWatch{gen: gen, in: in}
	}
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
