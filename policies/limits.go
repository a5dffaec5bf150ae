package policies

// DefaultLimitPolls is how many consecutive polls a process must be over a
// cpu or mem limit before supervision acts: one spike is not a breach.
const DefaultLimitPolls = 3

// LimitPolicy enforces resource.cpu and resource.mem, percent of the host.
type LimitPolicy struct {
	CPU   float64 // 0 = no limit
	Mem   float64 // 0 = no limit
	Polls int     // consecutive polls over a limit before acting
}

// LimitState counts consecutive polls over a limit.
type LimitState struct {
	Over int `json:"over"`
}

// LimitVerdict is one poll's outcome.
type LimitVerdict struct {
	State    LimitState
	Exceeded bool   // act now: stop, and start again if resident
	Which    string // "cpu" or "mem", for the event
}

// Observe folds one poll's usage into the state.
func (p LimitPolicy) Observe(st LimitState, cpu, mem float64) LimitVerdict {
	which := ""
	switch {
	case p.CPU > 0 && cpu > p.CPU:
		which = "cpu"
	case p.Mem > 0 && mem > p.Mem:
		which = "mem"
	}
	if which == "" {
		return LimitVerdict{State: LimitState{}}
	}
	st.Over++
	polls := p.Polls
	if polls <= 0 {
		polls = DefaultLimitPolls
	}
	if st.Over >= polls {
		return LimitVerdict{State: LimitState{}, Exceeded: true, Which: which}
	}
	return LimitVerdict{State: st, Which: which}
}

// CPUPercentBetween is a process's share of the whole host between two
// polls, from the change in its utime+stime and in the host's total ticks.
func CPUPercentBetween(procBefore, procAfter, hostBefore, hostAfter uint64) float64 {
	if hostAfter <= hostBefore || procAfter < procBefore {
		return 0
	}
	p := 100 * float64(procAfter-procBefore) / float64(hostAfter-hostBefore)
	if p > 100 {
		return 100
	}
	return p
}
