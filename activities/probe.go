package activities

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// probeHeader is the POSIX sh that reports the host itself. It reads /proc
// directly: one exec, no ps, no login shell. Every process it forks costs
// the host more than the whole SSH exec otherwise does, so it forks five
// (getconf twice, one awk for /proc/meminfo and /proc/stat, date and id),
// and only one, date, when the caller knows the host for this boot (kb,
// the boot_id a poll before read, with what else it learned then): what
// stays until a reboot is not read again, and the host's CPU ticks come
// from the first line of /proc/stat, read by the shell itself.
const probeHeader = `LC_ALL=C; export LC_ALL
bid=; { read -r bid < /proc/sys/kernel/random/boot_id; } 2>/dev/null
if [ -n "$bid" ] && [ "$bid" = "${kb-}" ]; then
  hz=$khz pg=$kpg mem=$kmem bt=$kbt ncpu=$kn u=$ku
  read -r _c c1 c2 c3 c4 c5 c6 c7 c8 c9 c10 _r < /proc/stat
  t1=$((${c1:-0}+${c2:-0}+${c3:-0}+${c4:-0}+${c5:-0}+${c6:-0}+${c7:-0}+${c8:-0}+${c9:-0}+${c10:-0}))
else
  hz=$(getconf CLK_TCK 2>/dev/null); hz=${hz:-100}
  pg=$(getconf PAGESIZE 2>/dev/null); pg=${pg:-4096}
  set -- $(awk '/^MemTotal:/{m=$2*1024} /^btime/{b=$2} /^cpu[0-9]/{n++} /^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i} END{printf "%.0f %.0f %d %.0f", m, b, n, t}' /proc/meminfo /proc/stat 2>/dev/null)
  mem=$1 bt=$2 ncpu=${3:-1} t1=$4 u=$(id -un)
fi
d=$(date '+%s %Z%z')
printf 'H\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$ncpu" "$hz" "${mem:-0}" "${bt:-0}" "${d%% *}" "${d#* }" "$pg" "$u" "$bid"
ticks() { awk '/^cpu /{s=0; for(i=2;i<=NF;i++) s+=$i; printf "%.0f", s; exit}' /proc/stat; }
statof() {
  st=; { IFS= read -r st < "/proc/$1/stat"; } 2>/dev/null || [ -n "$st" ] || return 1
  case $st in *") "*) ;; *) st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1 ;; esac
  st=${st##*) }
}
f20() { s20=${20}; }
pidin() {
  pid=; more=; { IFS= read -r pid; IFS= read -r more; } < "$1" 2>/dev/null
  case $pid in ''|*[!0-9]*|??????????*) pid= ;; esac
  [ -n "$pid" ] && [ -z "$more" ] || pid=$(head -c 64 "$1" 2>/dev/null | tr -cd '0-9' | cut -c1-9)
}
`

// probeBody samples every pid file named by the positional parameters. With
// a sampling window it samples the host's and each process's CPU ticks
// twice, so cpu% is a current rate, not a lifetime average; the second
// sample is of the pid the first one read. The pid file's common form, one
// line of digits, is read by the shell itself; anything else goes through
// head, tr and cut.
const probeBody = `i=0
for f in "$@"; do
  found=0; pid=""; st=""; exe=""; cl=""
  if [ -e "$f" ]; then found=1; pidin "$f"; fi
  eval "pid$i=\$pid"
  if [ -n "$pid" ] && statof "$pid"; then
    eval "k=\${k$i-}"; s20=; [ -z "$k" ] || f20 $st
    if [ -z "$k" ] || [ "$k" != "$pid $s20" ]; then
      exe=$(readlink "/proc/$pid/exe" 2>/dev/null)
      case $exe in *[[:cntrl:]]*) exe=$(readlink "/proc/$pid/exe" 2>/dev/null | tr '\t\n' '  ') ;; esac
      cl=$(tr '\000\t\n' '\t  ' < "/proc/$pid/cmdline" 2>/dev/null | head -c 4096)
    fi
  fi
  printf 'P\t%d\t%s\t%s\t%s\n' "$i" "$found" "$pid" "$st"
  printf 'X\t%d\t%s\n' "$i" "$exe"
  printf 'C\t%d\t%s\n' "$i" "$cl"
  i=$((i+1))
done
if [ "$window" != 0 ]; then
  sleep "$window"; t2=$(ticks); i=0
  for f in "$@"; do
    eval "pid=\$pid$i"
    if [ -n "$pid" ] && statof "$pid"; then set -- $st; printf 'Q\t%d\t%s\t%s\n' "$i" "${12}" "${13}"; fi
    i=$((i+1))
  done
  printf 'T\t%s\t%s\n' "$t1" "$t2"
else
  printf 'T\t%s\t%s\n' "$t1" "$t1"
fi
`

// ProbeScript builds the one-exec probe for the given pid files. window is
// the CPU sampling interval; zero takes one sample.
func ProbeScript(pidPaths []string, window time.Duration) string {
	return probeScript(pidPaths, window, nil, nil)
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

// vars sets the header's kb, khz, ... for k.
func (k *hostKnown) vars() string {
	return fmt.Sprintf("kb=%s khz=%d kpg=%d kmem=%d kbt=%d kn=%d ku=%s\n",
		transport.ShellQuote(k.bootID), k.hz, k.page, k.mem, k.bootTime, k.cpus, transport.ShellQuote(k.user))
}

// probeScript is ProbeScript that skips reading the exe and cmdline of a
// process known[i] names ("PID STARTTICKS", the incarnation a poll before
// found alive): a pid and start time name one process until the host
// reboots, so its exe is the one read then. Those reads are three of the
// probe's forks per process, most of what a supervision poll costs the
// host when nothing has changed.
func probeScript(pidPaths []string, window time.Duration, known []string, host *hostKnown) string {
	var b strings.Builder
	if host != nil {
		b.WriteString(host.vars())
	}
	b.WriteString(probeHeader)
	if window > 0 {
		fmt.Fprintf(&b, "window=%s\n", strconv.FormatFloat(window.Seconds(), 'f', 3, 64))
	} else {
		b.WriteString("window=0\n")
	}
	b.WriteString("set --")
	for _, p := range pidPaths {
		b.WriteString(" ")
		b.WriteString(transport.ShellQuote(p))
	}
	b.WriteString("\n")
	for i, k := range known {
		if k != "" {
			fmt.Fprintf(&b, "k%d='%s'\n", i, k)
		}
	}
	b.WriteString(probeBody)
	return b.String()
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
	sawHost := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		switch f[0] {
		case "H":
			if len(f) < 8 {
				return host, nil, fmt.Errorf("probe: short host line %q", sc.Text())
			}
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
			sawHost = true
		case "P", "X", "C", "Q":
			i, s := sampleFor(f, 2, samples)
			if s == nil {
				continue
			}
			switch f[0] {
			case "P":
				if len(f) < 5 {
					continue
				}
				s.PidFileFound = f[2] == "1"
				s.Pid = atoi(f[3])
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
			}
		case "T":
			if len(f) >= 3 {
				t1, t2 = atou(f[1]), atou(f[2])
				host.Ticks = t1
			}
		}
	}
	if err := sc.Err(); err != nil {
		return host, nil, fmt.Errorf("probe: %w", err)
	}
	if !sawHost {
		return host, nil, fmt.Errorf("probe: no host line in output")
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

// sampleFor is the sample a per-pid-file line (P, X, C, Q) is about: its
// index is the second field. Nil for a line shorter than minFields or with
// an index out of range.
func sampleFor(f []string, minFields int, samples []proc.Sample) (int, *proc.Sample) {
	if len(f) < minFields {
		return 0, nil
	}
	i := atoi(f[1])
	if i < 0 || i >= len(samples) {
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

// extrasScript appends version_cmd's first line and health_cmd's exit
// status to a probe, run in setup_path; each is bounded to 10 s.
func extrasScript(s proc.Spec) string {
	var b strings.Builder
	if s.VersionCmd == "" && s.HealthCmd == "" {
		return ""
	}
	fmt.Fprintf(&b, "cd %s 2>/dev/null || true\n", transport.ShellQuote(s.SetupPath))
	if s.VersionCmd != "" {
		fmt.Fprintf(&b, "v=$(timeout 10 sh -c %s 2>/dev/null </dev/null | head -n 1 | tr '\\t' ' ' | head -c 256); printf 'V\\t%%s\\n' \"$v\"\n", transport.ShellQuote(s.VersionCmd))
	}
	if s.HealthCmd != "" {
		fmt.Fprintf(&b, "timeout 10 sh -c %s </dev/null >/dev/null 2>&1; printf 'Z\\t%%d\\n' $?\n", transport.ShellQuote(s.HealthCmd))
	} else {
		b.WriteString("printf 'Z\\t0\\n'\n")
	}
	return b.String()
}

// parseExtras reads what extrasScript printed. Without a health_cmd a live
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
