package activities

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// ProbeScript is the one-exec probe of the given pid files
// (scripts/probe.sh), reading the host in full. window is the CPU sampling
// interval; zero takes one sample.
func ProbeScript(pidPaths []string, window time.Duration) transport.Command {
	return probeScript(pidPaths, window, nil)
}

// probeScript is ProbeScript told what an earlier probe read of the host.
func probeScript(pidPaths []string, window time.Duration, host *hostKnown) transport.Command {
	args := append([]string{seconds(window)}, host.opArgs()...)
	for _, p := range pidPaths {
		args = append(args, p, "")
	}
	return bounded(script("probe.sh", args...))
}

// hostKnown is what a probe learned of a host that stays the same until
// it reboots, named by the boot's id: a probe told it reads none of it.
type hostKnown struct {
	bootID    string
	cpus, hz  int
	page, mem uint64
	bootTime  int64
	user      string
}

// knownHost is what h says of its boot, or nil when it says too little
// (no boot_id: every probe reads the host in full).
func knownHost(h proc.HostInfo) *hostKnown {
	if h.BootID == "" || h.CPUs <= 0 || h.ClockTicks <= 0 || h.PageSize == 0 || h.MemTotal == 0 || h.BootTime <= 0 || h.User == "" {
		return nil
	}
	return &hostKnown{bootID: h.BootID, cpus: h.CPUs, hz: h.ClockTicks, page: h.PageSize, mem: h.MemTotal, bootTime: h.BootTime, user: h.User}
}

// args are probe_host's arguments for k (see scripts/lib_probe.sh): seven
// empty ones when nothing is known, and the host is read in full.
func (k *hostKnown) args() []string {
	if k == nil {
		return make([]string, 7)
	}
	return []string{k.bootID, strconv.Itoa(k.hz), strconv.FormatUint(k.page, 10), strconv.FormatUint(k.mem, 10),
		strconv.FormatInt(k.bootTime, 10), strconv.Itoa(k.cpus), k.user}
}

// opArgs are args for an op's probe: the user is left out, so the probe
// reads whom it runs as each time and the op checks it.
func (k *hostKnown) opArgs() []string {
	a := k.args()
	a[6] = ""
	return a
}

// hostFacts keeps, per host and account, what the last op's probe read of
// the host's boot, so the next probe there reads only what changes (no
// getconf, no awk: three of the processes a probe forked).
type hostFacts struct {
	mu sync.Mutex
	m  map[string]hostKnown
}

func factsKey(h inventory.Host, account string) string {
	return h.ID().String() + "\x00" + account
}

// get is what is known of h's boot for account, or nil.
func (f *hostFacts) get(h inventory.Host, account string) *hostKnown {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, ok := f.m[factsKey(h, account)]
	if !ok {
		return nil
	}
	return &k
}

// learn keeps what a probe of h as account read of its boot.
func (f *hostFacts) learn(h inventory.Host, account string, info proc.HostInfo) {
	k := knownHost(info)
	if k == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]hostKnown{}
	}
	f.m[factsKey(h, account)] = *k
}

// ParseProbe reads the probe's output. n is the number of pid files asked
// for; each gets a Sample even when the output says nothing of it.
func ParseProbe(out string, n int) (proc.HostInfo, []proc.Sample, error) {
	var host proc.HostInfo
	samples := make([]proc.Sample, n)
	second := make([]bool, n)
	var q1, q2 []uint64
	if n > 0 {
		q1, q2 = make([]uint64, n), make([]uint64, n)
	}
	var t1, t2 uint64
	pageSize := uint64(4096)
	err := linuxProbe.scan(out, samples, func(f []string, i int, s *proc.Sample) error {
		switch f[0] {
		case "H":
			host.CPUs = atoi(f[1])
			host.ClockTicks = atoi(f[2])
			host.MemTotal = atou(f[3])
			host.BootTime = int64(atou(f[4]))
			host.Now = int64(atou(f[5]))
			host.Timezone = f[6]
			if ps := atou(f[7]); ps > 0 {
				pageSize = ps
			}
			if len(f) > 8 {
				host.User = f[8]
			}
			if len(f) > 9 {
				host.BootID = f[9]
			}
		case "P":
			parseStat(s, f[4])
		case "X":
			if len(f) >= 3 {
				s.Exe = f[2]
			}
		case "C":
			if len(f) >= 3 {
				argv := f[2:]
				for len(argv) > 0 && argv[len(argv)-1] == "" {
					argv = argv[:len(argv)-1]
				}
				// A repeated line replaces the whole command line.
				s.Argv0, s.Argv1 = "", ""
				if len(argv) > 0 {
					s.Argv0 = argv[0]
				}
				if len(argv) > 1 {
					s.Argv1 = argv[1]
				}
				s.Cmdline = strings.Join(argv, " ")
			}
		case "Q":
			if len(f) >= 4 {
				second[i] = true
				q2[i] = atou(f[2]) + atou(f[3])
				q1[i] = s.UTime + s.STime
			}
		case "T":
			if len(f) >= 3 {
				t1, t2 = atou(f[1]), atou(f[2])
				host.Ticks = t1
			}
		}
		return nil
	})
	if err != nil {
		return host, nil, err
	}
	host.PageSize = pageSize
	for i := range samples {
		samples[i].RSSBytes *= pageSize
	}
	if t2 > t1 {
		for i := range samples {
			if second[i] && q2[i] >= q1[i] {
				samples[i].CPUTicksDelta = q2[i] - q1[i]
				samples[i].HostTicksDelta = t2 - t1
			}
		}
	}
	return host, samples, nil
}

// probeFormat is how a platform's probe output differs from another's:
// the line end it trims (cutset), and the fewest fields its host line and
// its per-pid-file lines have.
type probeFormat struct {
	cutset                   string
	hostFields, sampleFields int
}

var (
	linuxProbe   = probeFormat{cutset: "", hostFields: 8, sampleFields: 2}
	windowsProbe = probeFormat{cutset: "\r", hostFields: 7, sampleFields: 3}
)

// scan reads a probe's output a line at a time: each, its line end
// trimmed, is split at tabs and handed to line. A per-pid-file line (P, X,
// C, Q) comes with its sample (see sampleFor), a P line with the pid
// file's fields read into it; one naming no sample, or a P line too short
// for them, is passed over. It fails as line does, or on a short host line
// (H), or when the output could not be read to its end or had no host line.
func (pf probeFormat) scan(out string, samples []proc.Sample, line func(f []string, i int, s *proc.Sample) error) error {
	sawHost := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Split(strings.TrimRight(sc.Text(), pf.cutset), "\t")
		var i int
		var s *proc.Sample
		switch f[0] {
		case "H":
			if len(f) < pf.hostFields {
				return fmt.Errorf("probe: short host line %q", sc.Text())
			}
		case "P", "X", "C", "Q":
			if i, s = sampleFor(f, pf.sampleFields, samples); s == nil {
				continue
			}
			if f[0] == "P" {
				if len(f) < 5 {
					continue
				}
				s.PidFileFound = f[2] == "1"
				s.Pid = atoi(f[3])
			}
		}
		if err := line(f, i, s); err != nil {
			return err
		}
		sawHost = sawHost || f[0] == "H"
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if !sawHost {
		return fmt.Errorf("probe: no host line in output")
	}
	return nil
}

// sampleFor is the sample a per-pid-file line (P, X, C, Q) is about: its
// index is the second field. Nil for a line shorter than minFields or
// whose index is not a number in range: noise is never read as pid file 0.
func sampleFor(f []string, minFields int, samples []proc.Sample) (int, *proc.Sample) {
	if len(f) < minFields {
		return 0, nil
	}
	i, err := strconv.Atoi(strings.TrimSpace(f[1]))
	if err != nil || i < 0 || i >= len(samples) {
		return 0, nil
	}
	return i, &samples[i]
}

// parseStat reads /proc/PID/stat after the ") " that ends the comm field;
// the first remaining field is stat(3), so field N of proc(5) is rest[N-3].
func parseStat(s *proc.Sample, rest string) {
	f := strings.Fields(rest)
	if len(f) < 22 {
		return
	}
	s.Exists = true
	s.State = f[0]
	s.UTime = atou(f[11])
	s.STime = atou(f[12])
	s.Threads = atoi(f[17])
	s.StartTicks = atou(f[19])
	s.RSSBytes = atou(f[21]) // pages until the page size is known
}

func atoi(s string) int {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0
	}
	return v
}

func atou(s string) uint64 {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// parseExtras reads what status.sh printed after the probe. Without a health_cmd a live
// process counts as healthy.
func parseExtras(out string) proc.StatusExtras {
	ex := proc.StatusExtras{Healthy: true}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 2)
		if len(f) != 2 {
			continue
		}
		switch f[0] {
		case "V":
			// One line for the operator: a carriage return inside the
			// version_cmd's line (Windows line ends) ends it too.
			v, _, _ := strings.Cut(f[1], "\r")
			ex.Version = strings.TrimSpace(v)
		case "Z":
			ex.Healthy = strings.TrimSpace(f[1]) == "0"
		}
	}
	return ex
}
