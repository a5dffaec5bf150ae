package activities

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// WatchEntry is one supervised process as the host workflow knows it.
type WatchEntry struct {
	Process proc.ProcessID `json:"process"`
	Spec    proc.Spec      `json:"spec"`
	// Drifted lists configmap paths already reported, so drift is
	// reported once per change, not every poll.
	Drifted []string `json:"drifted,omitempty"`
}

// WatchInput asks for polling until something needs a decision.
type WatchInput struct {
	Target   proc.Target   `json:"target"`
	Entries  []WatchEntry  `json:"entries"`
	Interval time.Duration `json:"interval"`
	// LimitPolls is how many consecutive polls over a limit call for action.
	LimitPolls int `json:"limit_polls,omitempty"`
	// Renew ends a quiet watch after this long, so the activity is
	// refreshed now and then; zero means policies.WatchRenew.
	Renew time.Duration `json:"renew,omitempty"`
	// TimeZone is the operator's zone for crontab rules (an IANA name,
	// UTC or a fixed offset); empty means the host's own.
	TimeZone string `json:"time_zone,omitempty"`
	// Zone is the zone the host workflow reads crontab rules in now: a
	// watch of a crontab process returns when the zone differs.
	Zone policies.Zone `json:"zone,omitempty"`
}

// Watch event kinds.
const (
	WatchDead      = "dead"
	WatchUnhealthy = "unhealthy"
	WatchLimit     = "limit"
	WatchDrift     = "drift"
)

// WatchEvent is something the host workflow must decide on.
type WatchEvent struct {
	Index  int     `json:"index"` // into WatchInput.Entries
	Kind   string  `json:"kind"`
	Detail string  `json:"detail"`
	CPU    float64 `json:"cpu,omitempty"`
	Mem    float64 `json:"mem,omitempty"`
	// Drifted is the full set of drifted paths, for WatchDrift.
	Drifted []string `json:"drifted,omitempty"`
}

// WatchOutput ends a watch: events to decide on, or none when renewing.
type WatchOutput struct {
	Events []WatchEvent `json:"events,omitempty"`
	Polls  int          `json:"polls"`
	// Zone is set when the zone for crontab rules is not the input's.
	Zone *policies.Zone `json:"zone,omitempty"`
}

// Watch polls every supervised process on one host with one exec per poll,
// over the pooled connection, and returns only when a decision is needed:
// a quiet poll costs the workflow nothing. It heartbeats every poll, which
// is also how it learns it was cancelled.
func (a *Activities) Watch(ctx context.Context, in WatchInput) (WatchOutput, error) {
	host, ok := a.Inventory.Lookup(in.Target.HostID())
	if !ok {
		return WatchOutput{}, fmt.Errorf("host %s is not in the inventory", in.Target.HostID())
	}
	renew := in.Renew
	if renew <= 0 {
		renew = policies.WatchRenew
	}
	interval := in.Interval
	if interval <= 0 {
		interval = policies.DefaultPollInterval
	}
	// Heartbeats go on while a poll waits on a slow host, so a lost worker
	// is noticed within the heartbeat timeout, not after a poll's timeout.
	defer keepAlive(ctx)()
	// A stopping worker (a deploy) waits for its running activities; a
	// watch must not hold it up. It ends as a quiet renewal does, so the
	// host workflow asks the next worker for a new one, and the poll under
	// way (a read-only probe) is abandoned.
	ctx, stopping, release := StopOnWorkerStop(ctx)
	defer release()
	w := newWatcher(in, platformFor(host))
	if in.TimeZone != "" && w.crontab {
		// The worker checked the name when it started; a worker without
		// the zone database cannot honour it, and says so.
		loc, err := LoadZone(in.TimeZone)
		if err != nil {
			return WatchOutput{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("supervise_timezone %q: %v", in.TimeZone, err), "BadTimeZone", err)
		}
		w.loc = loc
	}
	ended := time.Now().Add(renew)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for polls := 1; ; polls++ {
		cmd := w.pollScript(policies.HealthCheckTimeout)
		cmd.Timeout = policies.WatchPollTimeout
		res, err := a.Runner.Run(ctx, host, cmd)
		if err == nil && res.ExitCode == 0 {
			events, zone := w.observe(string(res.Stdout)), w.zoneChange()
			if len(events) > 0 || zone != nil {
				return WatchOutput{Events: events, Polls: polls, Zone: zone}, nil
			}
		}
		// An unreachable host is polled again: supervision resumes when
		// it answers, and the watch never fails because of it.
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, polls)
		}
		if time.Now().After(ended) {
			return WatchOutput{Polls: polls}, nil
		}
		if stopping() {
			return WatchOutput{Polls: polls}, nil
		}
		select {
		case <-ctx.Done():
			if stopping() {
				return WatchOutput{Polls: polls}, nil
			}
			return WatchOutput{Polls: polls}, ctx.Err()
		case <-tick.C:
		}
	}
}

// watcher keeps what one watch needs between polls.
type watcher struct {
	in     WatchInput
	plat   platform
	limits []policies.LimitState
	// previous poll's CPU ticks of each process (by start time) and host
	prevTicks  []uint64
	prevStart  []uint64
	prevHost   uint64
	reportedMD map[string]bool
	// crontab: some entry runs by a crontab rule, so the zone matters.
	crontab bool
	// loc is the operator's zone, when one was chosen; hostZone is the
	// zone the host reported in its last poll.
	loc      *time.Location
	hostZone string
	// known[i] is entry i's process as a poll last found it alive, so
	// the next poll need not read its exe and cmdline again (see
	// probe_pids in scripts/lib_probe.sh); bootTime is the boot they
	// belong to.
	known    []knownProc
	bootTime int64
	// host is what the last poll learned of the host for its boot, so
	// the next poll need not read it again (see probe_host); the poll
	// after hostFullEvery of them reads it in full anyway (memory can be
	// added to a running host).
	host      *hostKnown
	hostPolls int
	// poll is the poll for the known processes named by pollKey.
	poll    transport.Command
	pollKey string
}

// hostFullEvery is how many polls of a host go by between two that read
// it in full although its boot is known.
const hostFullEvery = 60

// pollScript is the poll's one exec, in the platform's language, built
// again only when the known processes changed (a restart, a death).
func (w *watcher) pollScript(health time.Duration) transport.Command {
	keys := make([]string, len(w.known))
	for i, k := range w.known {
		keys[i] = k.arg()
	}
	host := w.host
	if w.hostPolls >= hostFullEvery {
		host, w.hostPolls = nil, 0
	}
	joined := strings.Join(keys, ",")
	if host != nil {
		joined += "|" + strings.Join(host.args(), " ")
	}
	if w.poll.Script == "" || joined != w.pollKey {
		w.poll, w.pollKey = w.plat.watchScript(w.in.Entries, health, keys, host), joined
		w.poll.Shell = w.plat.shell()
	}
	return w.poll
}

// recall completes samples whose exe and cmdline the poll skipped with
// those of the incarnation they were skipped for, then remembers what
// this poll found alive.
func (w *watcher) recall(host proc.HostInfo, samples []proc.Sample) {
	if host.BootTime != w.bootTime {
		// A reboot reuses pids and start times.
		w.known, w.bootTime = make([]knownProc, len(w.in.Entries)), host.BootTime
	}
	w.host = knownHost(host)
	w.hostPolls++
	for i := range samples {
		s := &samples[i]
		w.known[i].recall(s)
		w.known[i] = provenProc(*s, w.plat.alive(*s, w.in.Entries[i].Spec.ProcName))
	}
}

func newWatcher(in WatchInput, plat platform) *watcher {
	w := &watcher{in: in, plat: plat, limits: make([]policies.LimitState, len(in.Entries)),
		prevTicks: make([]uint64, len(in.Entries)), prevStart: make([]uint64, len(in.Entries)),
		known: make([]knownProc, len(in.Entries)), reportedMD: map[string]bool{}}
	for i, e := range in.Entries {
		for _, p := range e.Drifted {
			w.reportedMD[key(i, p)] = true
		}
		if e.Spec.CrontabRule != "" {
			w.crontab = true
		}
	}
	return w
}

// zoneChange is the zone crontab rules are to be read in, when it is not
// the one the host workflow uses (or nil): the operator's zone at its
// offset now, else the host's as its last poll reported it.
func (w *watcher) zoneChange() *policies.Zone {
	if !w.crontab {
		return nil
	}
	var z policies.Zone
	switch {
	case w.loc != nil:
		_, off := time.Now().In(w.loc).Zone()
		z = policies.Zone{Name: w.in.TimeZone, Offset: off, Known: true}
	default:
		hz, ok := policies.HostZone(w.hostZone)
		if !ok {
			return nil
		}
		z = hz
	}
	if z == w.in.Zone {
		return nil
	}
	return &z
}

// LoadZone reads an operator's zone: UTC, a fixed offset (+08:00) or an
// IANA name from the worker's zone database.
func LoadZone(name string) (*time.Location, error) {
	if z, ok := policies.FixedZone(name); ok {
		return z.Location(), nil
	}
	return time.LoadLocation(name)
}

func key(i int, path string) string { return strconv.Itoa(i) + "\x00" + path }

// observe evaluates one poll's output and returns the events it calls for.
func (w *watcher) observe(out string) []WatchEvent {
	host, samples, err := w.plat.parseProbe(out, len(w.in.Entries))
	if err != nil {
		return nil
	}
	w.recall(host, samples)
	health := map[int]string{}
	md := map[[2]int]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		switch {
		case f[0] == "Z" && len(f) == 3:
			health[atoi(f[1])] = strings.TrimSpace(f[2])
		case f[0] == "M" && len(f) == 4:
			md[[2]int{atoi(f[1]), atoi(f[2])}] = strings.TrimSpace(f[3])
		}
	}
	var events []WatchEvent
	for i, e := range w.in.Entries {
		s := samples[i]
		resident := e.Spec.AutoType == proc.AutoResident
		alive := w.plat.alive(s, e.Spec.ProcName)
		if resident && !alive {
			events = append(events, WatchEvent{Index: i, Kind: WatchDead,
				Detail: fmt.Sprintf("process(%s) is not running (pid file %s)", e.Spec.ProcName, e.Spec.PidPath)})
			continue
		}
		if resident {
			if why := unhealthy(health[i], e.Spec.ProcName); why != "" {
				events = append(events, WatchEvent{Index: i, Kind: WatchUnhealthy, Detail: why})
				continue
			}
			if ev, ok := w.limit(i, e, s, host); ok {
				events = append(events, ev)
				continue
			}
		}
		if ev, ok := w.drift(i, e, md); ok {
			events = append(events, ev)
		}
	}
	w.prevHost = host.Ticks
	w.hostZone = host.Timezone
	return events
}

// unhealthy says why a health check's status means the process is not
// healthy, or "" when it is, was not checked, or could not be run as its
// account (sudo refused: the check says nothing of the process).
func unhealthy(status, procName string) string {
	switch status {
	case "", "0", "sudo":
		return ""
	case "124", "137":
		return fmt.Sprintf("health_cmd of %s timed out after %s", procName, policies.HealthCheckTimeout)
	}
	return fmt.Sprintf("health_cmd of %s failed (exit %s)", procName, status)
}

// limit checks cpu and mem against the spec over consecutive polls. CPU%
// is the change in utime+stime since the previous poll of the same
// incarnation, over the host's total ticks: never a lifetime average.
func (w *watcher) limit(i int, e WatchEntry, s proc.Sample, host proc.HostInfo) (WatchEvent, bool) {
	ticks := s.UTime + s.STime
	defer func() { w.prevTicks[i], w.prevStart[i] = ticks, s.StartTicks }()
	if w.prevHost == 0 || w.prevStart[i] != s.StartTicks {
		return WatchEvent{}, false // first sight of this incarnation
	}
	cpu := policies.CPUPercentBetween(w.prevTicks[i], ticks, w.prevHost, host.Ticks)
	mem := proc.MemPercent(s, host)
	polls := w.in.LimitPolls
	if polls <= 0 {
		polls = policies.DefaultLimitPolls
	}
	v := policies.LimitPolicy{CPU: e.Spec.CPULimit, Mem: e.Spec.MemLimit, Polls: polls}.Observe(w.limits[i], cpu, mem)
	w.limits[i] = v.State
	if !v.Exceeded {
		return WatchEvent{}, false
	}
	return WatchEvent{Index: i, Kind: WatchLimit, CPU: cpu, Mem: mem,
		Detail: fmt.Sprintf("%s over its limit for %d polls: cpu %.1f%% (limit %.1f), mem %.1f%% (limit %.1f)",
			e.Spec.ProcName, polls, cpu, e.Spec.CPULimit, mem, e.Spec.MemLimit)}, true
}

// drift reports config files whose md5 differs from the registered one,
// once per change.
func (w *watcher) drift(i int, e WatchEntry, md map[[2]int]string) (WatchEvent, bool) {
	var drifted []string
	changed := false
	for j, c := range e.Spec.ConfigMap {
		got, ok := md[[2]int{i, j}]
		if !ok {
			continue
		}
		k := key(i, c.Path)
		bad := !strings.EqualFold(got, c.MD5)
		if bad {
			drifted = append(drifted, c.Path)
		}
		if bad != w.reportedMD[k] {
			changed = true
			w.reportedMD[k] = bad
		}
	}
	if !changed {
		return WatchEvent{}, false
	}
	detail := "config files match their registered md5"
	if len(drifted) > 0 {
		detail = "config drift: md5 of " + strings.Join(drifted, ", ") + " differs from the registered one"
	}
	return WatchEvent{Index: i, Kind: WatchDrift, Detail: detail, Drifted: drifted}, true
}
