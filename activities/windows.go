package activities

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
	"github.com/drover-sh/drover/transport/psenc"
)

// windowsPlatform is Windows PowerShell over WinRM. Each script is a ps1
// file of scripts/ whose param block takes its arguments, which reach the
// host as single-quoted literals (psenc.Invocation): nothing from a
// request is ever spliced into PowerShell source, and the WinRM test
// double recognises the scripts by name and arguments.
type windowsPlatform struct {
	login string // the WinRM user
}

func (windowsPlatform) shell() transport.Shell { return transport.ShellPowerShell }

func (windowsPlatform) fits(spec proc.Spec) string {
	if spec.ShellExt != proc.ShellBat && spec.ShellExt != proc.ShellPS1 {
		return fmt.Sprintf("cmd_shell_ext %q cannot run on a Windows (winrm) host; use bat or ps1", spec.ShellExt)
	}
	if spec.ShellExt == proc.ShellBat && !hasAnyCommand(spec) {
		for _, f := range []struct{ name, v string }{{"setup_path", spec.SetupPath}, {"proc_name", spec.ProcName}} {
			if strings.ContainsAny(f.v, `"%`) {
				return fmt.Sprintf("%s %q holds %s, which no cmd.exe quoting keeps literal in the default bat commands", f.name, f.v, `" or %`)
			}
		}
	}
	return ""
}

func (w windowsPlatform) account(spec proc.Spec) string {
	if accountIsLogin(spec) {
		return ""
	}
	return spec.Account
}

func (w windowsPlatform) ranAs(user string, spec proc.Spec) bool {
	want := w.login
	if !accountIsLogin(spec) {
		want = spec.Account
	}
	return transport.SameWindowsAccount(user, want)
}

// winProbe is probe.ps1's arguments.
type winProbe struct {
	Files    []string
	WindowMS int64
	Checks   []winCheck
}

// script is probe.ps1 with p's arguments; the checks go as one JSON text.
func (p winProbe) script() transport.Command {
	checks := ""
	if len(p.Checks) > 0 {
		j, err := json.Marshal(p.Checks)
		if err != nil {
			panic(err) // drover's own plain struct
		}
		checks = string(j)
	}
	return script("probe.ps1", append([]string{strconv.FormatInt(p.WindowMS, 10), checks}, p.Files...)...)
}

// winCheck is an extra line of probe output: Tag, then the first line of a
// version command, the exit code of a health command, or a file's md5.
type winCheck struct {
	Tag   string `json:"tag"`
	Kind  string `json:"kind"` // version, health, md5
	Setup string `json:"setup,omitempty"`
	Shell string `json:"shell,omitempty"`
	Cmd   string `json:"cmd,omitempty"`
	Path  string `json:"path,omitempty"`
}

func (windowsPlatform) statusScript(spec proc.Spec, window time.Duration, extras bool, _ *hostKnown, _ string) transport.Command {
	p := winProbe{Files: []string{spec.PidPath}, WindowMS: window.Milliseconds()}
	if extras {
		// The same V and Z lines as the Linux probe, for parseExtras.
		if spec.VersionCmd != "" {
			p.Checks = append(p.Checks, winCheck{Tag: "V\t", Kind: "version", Setup: spec.SetupPath, Shell: string(spec.ShellExt), Cmd: spec.VersionCmd})
		}
		if spec.HealthCmd != "" {
			p.Checks = append(p.Checks, winCheck{Tag: "Z\t", Kind: "health", Setup: spec.SetupPath, Shell: string(spec.ShellExt), Cmd: spec.HealthCmd})
		}
	}
	return p.script()
}

func (windowsPlatform) watchScript(entries []WatchEntry, _ time.Duration, _ []string, _ *hostKnown) transport.Command {
	p := winProbe{Files: make([]string, len(entries))}
	for i, e := range entries {
		p.Files[i] = e.Spec.PidPath
		if e.Spec.HealthCmd != "" {
			p.Checks = append(p.Checks, winCheck{Tag: fmt.Sprintf("Z\t%d\t", i), Kind: "health", Setup: e.Spec.SetupPath, Shell: string(e.Spec.ShellExt), Cmd: e.Spec.HealthCmd})
		}
		for j, c := range e.Spec.ConfigMap {
			if c.Path != "" && c.MD5 != "" {
				p.Checks = append(p.Checks, winCheck{Tag: fmt.Sprintf("M\t%d\t%d\t", i, j), Kind: "md5", Path: c.Path})
			}
		}
	}
	return p.script()
}

func (windowsPlatform) alive(s proc.Sample, name string) bool { return proc.AliveWindows(s, name) }

// controlScript runs cmd in setup_path (scripts/control.ps1); Windows ops
// are neither marked nor noted.
func (windowsPlatform) controlScript(spec proc.Spec, cmd string, _ opMark, _ *noting) transport.Command {
	secs := int(spec.OpTimeout.Round(time.Second) / time.Second)
	return script("control.ps1", spec.SetupPath, string(spec.ShellExt), cmd, strconv.Itoa(max(secs, 1)))
}

// checksInControl: a Windows control command and its check stay two
// commands; each PowerShell script is already bounded by the command line.
func (windowsPlatform) checksInControl() bool { return false }

// signalScript: scripts/signal.ps1.
func (windowsPlatform) signalScript(_ opMark, pid int, startTicks uint64, sig string, wait time.Duration) transport.Command {
	force := "0"
	if sig == "KILL" {
		force = "1"
	}
	return script("signal.ps1", strconv.Itoa(pid), strconv.FormatUint(startTicks, 10), force, strconv.FormatInt(wait.Milliseconds(), 10))
}

// whoami is a probe of no pid file: its host line names the user.
func (windowsPlatform) whoami() transport.Command { return winProbe{}.script() }

func (windowsPlatform) whoamiOf(out string) (string, error) {
	info, _, err := parseWindowsProbe(out, 0)
	if err == nil && info.User == "" {
		err = fmt.Errorf("probe named no user")
	}
	return info.User, err
}

// defaultCommand is the job platform's convention for bat and ps1: the
// script by its full path, with no `./` and no `&`, e.g.
// `C:\app\start.bat svc`. Paths and names that need it are quoted for
// the language the command runs in.
func (windowsPlatform) defaultCommand(verb string, spec proc.Spec) string {
	ext := string(spec.ShellExt)
	script := strings.TrimRight(spec.SetupPath, `\/`) + `\` + verb + "." + ext
	if ext == string(proc.ShellPS1) {
		if psNeedsQuote(script) || psNeedsQuote(spec.ProcName) {
			return "& " + PSQuote(script) + " " + PSQuote(spec.ProcName)
		}
		return script + " " + spec.ProcName
	}
	return CmdQuote(script) + " " + CmdQuote(spec.ProcName)
}

// PSQuote is s as a PowerShell single-quoted string: nothing in it is
// expanded; each single quote, ' or a typographic one, is written twice.
func PSQuote(s string) string { return psenc.Quote(s) }

func psNeedsQuote(s string) bool {
	return s == "" || strings.ContainsAny(s, " \t'\"`$&|;(){}@#,<>\u2018\u2019\u201a\u201b")
}

// CmdQuote is s as one cmd.exe argument: double-quoted when it holds
// characters cmd.exe or the argument splitter treat specially. cmd.exe has
// no escape for " inside quotes, and % is expanded even there: fits
// refuses specs whose default commands would need either.
func CmdQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t&|<>^(),;=") {
		return s
	}
	return `"` + s + `"`
}

// ticksPerSecond is the resolution of .NET ticks and Windows CPU times.
const ticksPerSecond = 10_000_000

// dotnetUnixEpoch is DateTime.Ticks of 1970-01-01 UTC.
const dotnetUnixEpoch = 621355968000000000

// parseWindowsProbe reads probe.ps1's output into the same HostInfo and
// Samples the Linux probe gives: times since boot in 100 ns ticks
// (ClockTicks 10^7), so start time, pid reuse and cpu% follow the same
// rules. n is the number of pid files asked for.
func parseWindowsProbe(out string, n int) (proc.HostInfo, []proc.Sample, error) {
	var host proc.HostInfo
	samples := make([]proc.Sample, n)
	second := make([]bool, n)
	q2 := make([]uint64, n)
	var boot, now, w1, w2 int64
	err := windowsProbe.scan(out, samples, func(f []string, i int, s *proc.Sample) error {
		switch f[0] {
		case "H":
			host.CPUs = atoi(f[1])
			host.MemTotal = atou(f[2])
			boot, now = atoi64(f[3]), atoi64(f[4])
			if boot <= 0 || now < boot {
				return fmt.Errorf("probe: host line has boot %q and now %q ticks", f[3], f[4])
			}
			// Start ticks count from the boot's whole second, as the signal
			// script's do, so BootTime + StartTicks is the exact start.
			boot -= boot % ticksPerSecond
			host.ClockTicks = ticksPerSecond
			host.BootTime = (boot - dotnetUnixEpoch) / ticksPerSecond
			host.Now = (now - dotnetUnixEpoch) / ticksPerSecond
			host.Timezone = windowsTimezone(f[5])
			host.User = f[6]
			// The host's CPU time: every logical processor since boot.
			host.Ticks = uint64(now-boot) * uint64(max(host.CPUs, 1))
		case "P":
			if f[4] != "1" || len(f) < 11 {
				return nil
			}
			created := atoi64(f[5])
			if created <= boot {
				return nil // not a process of this boot: never alive
			}
			s.Exists = true
			s.StartTicks = uint64(created - boot)
			s.UTime, s.STime = atou(f[6]), atou(f[7])
			s.RSSBytes = atou(f[8])
			s.Threads = atoi(f[9])
			s.Argv0 = f[10] // the process name, as Get-Process gives it
		case "X":
			s.Exe = f[2]
		case "C":
			s.Cmdline = f[2]
		case "Q":
			second[i] = true
			q2[i] = atou(f[2])
		case "T":
			if len(f) >= 3 {
				w1, w2 = atoi64(f[1]), atoi64(f[2])
			}
		}
		return nil
	})
	if err != nil {
		return host, nil, err
	}
	// cpu%: processor time used over the window, over the window's time on
	// every logical processor.
	if w2 > w1 {
		wall := uint64(w2-w1) * uint64(max(host.CPUs, 1))
		for i := range samples {
			if q1 := samples[i].UTime + samples[i].STime; second[i] && samples[i].Exists && q2[i] >= q1 {
				samples[i].CPUTicksDelta = q2[i] - q1
				samples[i].HostTicksDelta = wall
			}
		}
	}
	return host, samples, nil
}

func atoi64(s string) int64 {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// windowsTimezone turns Get-Date's "zzz" offset (+08:00) into the
// UTC+0800 form the Linux probe reports.
func windowsTimezone(zzz string) string {
	return "UTC" + strings.ReplaceAll(strings.TrimSpace(zzz), ":", "")
}

func (windowsPlatform) parseProbe(out string, n int) (proc.HostInfo, []proc.Sample, error) {
	return parseWindowsProbe(out, n)
}
