package policies

import (
	"hash/fnv"
	"strconv"
	"time"
)

// RestartPolicy decides what supervision does when a managed resident
// process is found dead: start it again, after how long, or give up.
//
// The first start after a death is immediate, so a crash is repaired within
// one poll. Each further attempt, after a failed start, waits Interval
// doubled per attempt, capped at MaxDelay, with up to Jitter of it added
// so a fleet that died together does not restart in lockstep.
type RestartPolicy struct {
	Retries  int           // start_retries: attempts before giving up
	Interval time.Duration // start_interval: the base delay between attempts
	MaxDelay time.Duration // cap on one delay
	Jitter   float64       // 0..1: share of the delay added at random
}

// RestartState is what supervision remembers of a process's restarts.
type RestartState struct {
	// Attempts is how many starts were tried since the process last stayed
	// up past its start-check window.
	Attempts int `json:"attempts"`
}

// RestartAction is the decision's kind.
type RestartAction int

const (
	RestartNow    RestartAction = iota + 1 // start it again after Delay
	RestartGiveUp                          // cancel management: retries spent
)

// RestartDecision says what to do and when.
type RestartDecision struct {
	Action RestartAction
	Delay  time.Duration
}

// NewRestartPolicy builds the policy for a spec's start_retries and
// start_interval, already defaulted.
func NewRestartPolicy(retries int, interval time.Duration) RestartPolicy {
	return RestartPolicy{Retries: retries, Interval: interval, MaxDelay: MaxRestartDelay, Jitter: RestartJitter}
}

// Defaults for the parts of the restart policy GSE does not expose.
const (
	MaxRestartDelay = 5 * time.Minute
	RestartJitter   = 0.25
)

// Next decides after a death (or a failed start), given the state so far.
// key makes the jitter deterministic per process and attempt, so workflow
// replays decide the same.
func (p RestartPolicy) Next(st RestartState, key string) RestartDecision {
	if st.Attempts >= p.Retries {
		return RestartDecision{Action: RestartGiveUp}
	}
	if st.Attempts == 0 {
		return RestartDecision{Action: RestartNow}
	}
	d := p.Interval
	for i := 1; i < st.Attempts && d < p.MaxDelay; i++ {
		d *= 2
	}
	if p.MaxDelay > 0 && d > p.MaxDelay {
		d = p.MaxDelay
	}
	if p.Jitter > 0 {
		d += time.Duration(float64(d) * p.Jitter * unitHash(key, st.Attempts))
	}
	return RestartDecision{Action: RestartNow, Delay: d}
}

// Started records an attempt.
func (st RestartState) Started() RestartState { st.Attempts++; return st }

// StayedUp resets the count: the process outlived its start-check window.
func (st RestartState) StayedUp() RestartState { return RestartState{} }

// unitHash maps (key, n) to [0, 1) deterministically.
func unitHash(key string, n int) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte(strconv.Itoa(n)))
	return float64(h.Sum64()>>11) / float64(1<<53)
}
