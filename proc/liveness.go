package proc

import (
	"path"
	"strings"
)

// Sample is what one probe saw of the process behind a pid file.
type Sample struct {
	PidFileFound bool
	Pid          int    // from the pid file; 0 when absent or unreadable
	Exists       bool   // /proc/PID exists
	Exe          string // /proc/PID/exe target; empty when not readable
	Cmdline      string // argv joined by spaces
	Argv0        string
	Argv1        string
	State        string
	StartTicks   uint64 // starttime from /proc/PID/stat, clock ticks since boot
	UTime        uint64 // ticks
	STime        uint64 // ticks
	Threads      int
	RSSBytes     uint64
	// CPUTicksDelta is utime+stime consumed between the probe's two samples,
	// and HostTicksDelta the host's total CPU ticks (all cores) over the same
	// window; both zero when only one sample was taken.
	CPUTicksDelta  uint64
	HostTicksDelta uint64
}

// HostInfo is what one probe saw of the host itself.
type HostInfo struct {
	CPUs       int
	ClockTicks int    // USER_HZ
	MemTotal   uint64 // bytes
	BootTime   int64  // unix seconds
	Now        int64  // unix seconds on the host
	Timezone   string
	User       string // the account the probe ran as
	Ticks      uint64 // the host's total CPU ticks (all cores) at the probe
	PageSize   uint64 // bytes
	BootID     string // names the boot (Linux's boot_id); "" when unknown
}

// interpreters run a script named by argv[1]; for them the script name is
// the process's name.
var interpreters = map[string]bool{
	"sh": true, "bash": true, "dash": true, "ksh": true, "zsh": true,
	"python": true, "python2": true, "python3": true, "perl": true,
	"ruby": true, "node": true, "php": true,
}

// Alive reports whether the sample is the process called procName: the pid
// from the pid file exists and its executable, or its argv[0], or the script
// an interpreter runs, is procName. A pid reused by another program is not
// alive, which is why the pid alone is never enough.
func Alive(s Sample, procName string) bool {
	if !s.PidFileFound || s.Pid <= 0 || !s.Exists || s.State == "Z" || procName == "" {
		return false
	}
	exe := strings.TrimSuffix(s.Exe, " (deleted)")
	if exe != "" && path.Base(exe) == procName {
		return true
	}
	a0 := path.Base(s.Argv0)
	if s.Argv0 != "" && a0 == procName {
		return true
	}
	if interpreters[a0] || interpreters[path.Base(exe)] {
		return s.Argv1 != "" && path.Base(s.Argv1) == procName
	}
	return false
}

// SameIncarnation reports whether a live sample is the process whose start
// time was recorded earlier: a restart or a reused pid changes the start time.
func SameIncarnation(s Sample, recordedStartTicks uint64) bool {
	return recordedStartTicks != 0 && s.StartTicks == recordedStartTicks
}

// CPUPercent is the process's share of the whole host over the sampling
// window, in [0, 100]. It is never ps's lifetime average.
func CPUPercent(s Sample) float64 {
	if s.HostTicksDelta == 0 {
		return 0
	}
	p := 100 * float64(s.CPUTicksDelta) / float64(s.HostTicksDelta)
	if p > 100 {
		p = 100
	}
	return p
}

// CPUPercentLifetime is the average share of the host since the process
// started (GSE's cpuUsageAve).
func CPUPercentLifetime(s Sample, h HostInfo) float64 {
	if h.ClockTicks <= 0 || h.CPUs <= 0 {
		return 0
	}
	elapsed := ElapsedSeconds(s, h)
	if elapsed <= 0 {
		return 0
	}
	used := float64(s.UTime+s.STime) / float64(h.ClockTicks)
	p := 100 * used / (float64(elapsed) * float64(h.CPUs))
	if p > 100 {
		p = 100
	}
	return p
}

// MemPercent is resident memory as a share of host memory.
func MemPercent(s Sample, h HostInfo) float64 {
	if h.MemTotal == 0 {
		return 0
	}
	return 100 * float64(s.RSSBytes) / float64(h.MemTotal)
}

// StartUnix converts the process start time to unix seconds.
func StartUnix(s Sample, h HostInfo) int64 {
	if h.ClockTicks <= 0 {
		return 0
	}
	return h.BootTime + int64(s.StartTicks)/int64(h.ClockTicks)
}

// ElapsedSeconds is how long the process has run.
func ElapsedSeconds(s Sample, h HostInfo) int64 {
	start := StartUnix(s, h)
	if start == 0 || h.Now < start {
		return 0
	}
	return h.Now - start
}

// AliveWindows is Alive for a Windows host: the pid from the pid file is a
// live process whose executable (ExecutablePath) or process name is
// procName, compared without ".exe" and ignoring case, as Windows does. A
// pid reused by another program is not alive.
func AliveWindows(s Sample, procName string) bool {
	if !s.PidFileFound || s.Pid <= 0 || !s.Exists || procName == "" {
		return false
	}
	base := func(p string) string {
		p = p[strings.LastIndexAny(p, `\/`)+1:]
		return strings.TrimSuffix(strings.ToLower(p), ".exe")
	}
	want := base(procName)
	return (s.Exe != "" && base(s.Exe) == want) || (s.Argv0 != "" && base(s.Argv0) == want)
}
