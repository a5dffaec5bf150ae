package policies

import (
	"hash/fnv"
	"strconv"
	"time"
)

// RestartPolicy decides what supervision does when a managed resident
// process is found dead (or unhealthy): start it again, after how long, or
// give up. It is modelled on Nomad's restart tracker, with GSE's knobs.
//
// The first start after a death is immediate, so a crash is repaired within
// one poll. Each further attempt, after a failed start, waits Interval
// doubled per attempt, capped at MaxDelay, with up to Jitter of it added
// so a fleet that died together does not restart in lockstep; after Retries
// failed starts, supervision gives up.
//
// A process that passes its start check and then dies again within
// StableAfter is crash-looping: each start succeeds, so the retries never
// run out, and without a delay it would be started again every poll
// forever. Its first quick death is still repaired at once; each further
// one waits as a failed start would (Interval, doubled per crash, capped
// at MaxDelay), and a run that lasts StableAfter clears the count. A crash
// loop is never given up on: each of its starts works.
type RestartPolicy struct {
	Retries  int           // start_retries: failed starts before giving up
	Interval time.Duration // start_interval: the base delay between attempts
	MaxDelay time.Duration // cap on one delay
	Jitter   float64       // 0..1: share of the delay added at random
	// StableAfter is how long a start must stay up to count as a good
	// run; zero turns crash-loop backoff off.
	StableAfter time.Duration
}

// RestartState is what supervision remembers of a process's restarts.
type RestartState struct {
	// Attempts is how many starts were tried since the process last stayed
	// up past its start-check window.
	Attempts int `json:"attempts"`
	// Crashes counts deaths in a row, each within StableAfter of a start
	// that passed its check.
	Crashes int `json:"crashes,omitempty"`
	// UpSince is when the last start by supervision passed its check.
	UpSince time.Time `json:"up_since,omitempty"`
}

// RestartAction is the decision's kind.
type RestartAction int

const (
	RestartNow    RestartAction = iota + 1 // start it again after Delay
	RestartGiveUp                          // cancel management: retries spent
)

// RestartDecision says what to do and when, and the state to keep.
type RestartDecision struct {
	Action RestartAction
	Delay  time.Duration
	State  RestartState
	// CrashLoop: the delay is there because the process keeps dying soon
	// after its starts, not because a start failed.
	CrashLoop bool
}

// NewRestartPolicy builds the policy for a spec's start_retries and
// start_interval, already defaulted.
func NewRestartPolicy(retries int, interval time.Duration) RestartPolicy {
	return RestartPolicy{Retries: retries, Interval: interval, MaxDelay: MaxRestartDelay, Jitter: RestartJitter, StableAfter: StableRun}
}

// Defaults for the parts of the restart policy GSE does not expose.
const (
	MaxRestartDelay = 5 * time.Minute
	RestartJitter   = 0.25
	// StableRun is how long a process must run after a start by
	// supervision before its next death is taken as a new crash rather
	// than the same crash loop.
	StableRun = 10 * time.Minute
)

// Next decides after a death (or a failed start) seen at now, given the
// state so far. key makes the jitter deterministic per process and
// attempt, so workflow replays decide the same.
func (p RestartPolicy) Next(st RestartState, now time.Time, key string) RestartDecision {
	switch {
	case st.Attempts >= p.Retries:
		return RestartDecision{Action: RestartGiveUp, State: st}
	case st.Attempts > 0:
		return RestartDecision{Action: RestartNow, Delay: p.delay(st.Attempts, key), State: st}
	}
	// A death of a process that was running.
	if p.StableAfter <= 0 || st.UpSince.IsZero() || now.Sub(st.UpSince) >= p.StableAfter {
		st.Crashes = 0
		return RestartDecision{Action: RestartNow, State: st}
	}
	st.Crashes++
	if st.Crashes == 1 {
		return RestartDecision{Action: RestartNow, State: st}
	}
	return RestartDecision{Action: RestartNow, Delay: p.delay(st.Crashes-1, "crash:"+key), State: st, CrashLoop: true}
}

// delay is the wait before the n-th further attempt (n >= 1): Interval
// doubled n-1 times, capped, plus jitter.
func (p RestartPolicy) delay(n int, key string) time.Duration {
	d := p.Interval
	for i := 1; i < n && d < p.MaxDelay; i++ {
		d *= 2
	}
	if p.MaxDelay > 0 && d > p.MaxDelay {
		d = p.MaxDelay
	}
	if p.Jitter > 0 {
		d += time.Duration(float64(d) * p.Jitter * unitHash(key, n))
	}
	return d
}

// Started records an attempt.
func (st RestartState) Started() RestartState { st.Attempts++; return st }

// StayedUp resets the failed starts: the process outlived its start-check
// window at now. A crash loop's count stays until a run lasts StableAfter.
func (st RestartState) StayedUp(now time.Time) RestartState {
	return RestartState{Crashes: st.Crashes, UpSince: now}
}

// unitHash maps (key, n) to [0, 1) deterministically.
func unitHash(key string, n int) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte(strconv.Itoa(n)))
	return float64(h.Sum64()>>11) / float64(1<<53)
}
