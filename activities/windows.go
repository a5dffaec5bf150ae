package activities

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// windowsPlatform is Windows PowerShell over WinRM. Each script is a
// `#drover:KIND` marker, its parameters as JSON in one single-quoted
// string, and a fixed body: nothing from a request is ever spliced into
// PowerShell source, and the WinRM test double recognises the scripts by
// marker and parameters.
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

// psScript is a drover PowerShell script of kind with params.
func psScript(kind string, params any, body string) string {
	j, err := json.Marshal(params)
	if err != nil {
		panic(err) // params are drover's own plain structs
	}
	return "#drover:" + kind + "\n$p = ConvertFrom-Json '" + strings.ReplaceAll(string(j), "'", "''") + "'\n" + body
}

// winRun runs one command line of the spec's language in a directory,
// bounded to $s seconds. The command is started by WMI (Win32_Process
// Create), outside the WinRM shell's job object: daemons it starts must
// outlive the shell, which ends them otherwise. Its output and exit code
// come back through temporary files.
const winRun = `function Run($sh, $cmd, $dir, $s) {
$o = [IO.Path]::GetTempFileName()
if ($sh -eq 'ps1') { $c = 'powershell.exe -NoProfile -NonInteractive -ExecutionPolicy Bypass -EncodedCommand ' + [Convert]::ToBase64String([Text.Encoding]::Unicode.GetBytes($cmd)) } else { $c = 'cmd.exe /d /s /c "' + $cmd + '"' }
$r = Invoke-CimMethod -ClassName Win32_Process -MethodName Create -Arguments @{CommandLine = 'cmd.exe /d /s /c "' + $c + ' >"' + $o + '" 2>&1 & call echo %^errorlevel% >"' + $o + '.rc""'; CurrentDirectory = $dir}
if ($r.ReturnValue -ne 0) { return @{rc = 96; to = 0; out = "process not created: $($r.ReturnValue)"} }
$t = 0; $w = [Diagnostics.Stopwatch]::StartNew()
while (Get-Process -Id $r.ProcessId) { if ($w.Elapsed.TotalSeconds -ge $s) { $t = 1; taskkill.exe /T /F /PID $r.ProcessId *> $null; break }; Start-Sleep -Milliseconds 100 }
$rc = 1; $v = "$(Get-Content -LiteralPath "$o.rc" -TotalCount 1)".Trim(); if ($v -match '^-?\d+$') { $rc = [int]$v }
$out = "$(Get-Content -LiteralPath $o -Raw)"; Remove-Item -LiteralPath $o, "$o.rc"
@{rc = $rc; to = $t; out = $out}
}
`

// winControlBody runs $p.cmd in $p.setup and ends with the same trailer
// as the Linux control script, so one parser reads both.
const winControlBody = `$ErrorActionPreference = 'SilentlyContinue'
if (-not (Test-Path -LiteralPath $p.setup)) { "` + trailer + ` rc=97 timeout=0 setup=` + setupMissing + `"; exit 0 }
if (-not (Test-Path -LiteralPath $p.setup -PathType Container)) { "` + trailer + ` rc=97 timeout=0 setup=` + setupNotDir + `"; exit 0 }
` + winRun + `$x = Run $p.shell $p.cmd $p.setup $p.timeout_s
$x.out.Substring(0, [Math]::Min(4096, $x.out.Length))
"` + "`n" + trailer + ` rc=$($x.rc) timeout=$($x.to)"
exit 0
`

// winProbeBody prints the probe lines parseWindowsProbe reads. Numbers
// reach the output by string interpolation, which PowerShell formats with
// the invariant culture whatever the host's locale; times are .NET ticks
// (100 ns) in UTC. It exits 0 explicitly: powershell's exit code is
// otherwise whether the last statement succeeded, and a missing config
// file is no failed probe.
const winProbeBody = `$ErrorActionPreference = 'SilentlyContinue'
$os = Get-CimInstance Win32_OperatingSystem; $cs = Get-CimInstance Win32_ComputerSystem
"H` + "`t" + `$($cs.NumberOfLogicalProcessors)` + "`t" + `$($cs.TotalPhysicalMemory)` + "`t" + `$($os.LastBootUpTime.ToUniversalTime().Ticks)` + "`t" + `$([DateTime]::UtcNow.Ticks)` + "`t" + `$((Get-Date).ToString('zzz'))` + "`t" + `$env:USERNAME"
$ids = @(); $i = 0; $w1 = [DateTime]::UtcNow.Ticks
foreach ($f in $p.files) {
$n = [int](Test-Path -LiteralPath $f -PathType Leaf); $id = 0
if ($n) { $t = "$(Get-Content -LiteralPath $f -TotalCount 1)" -replace '\D', ''; if ($t.Length -gt 0 -and $t.Length -lt 10) { $id = [int]$t } }
$g = $null; if ($id) { $g = Get-Process -Id $id }
if ($g) { $c = Get-CimInstance Win32_Process -Filter "ProcessId=$id"
"P` + "`t" + `$i` + "`t" + `1` + "`t" + `$id` + "`t" + `1` + "`t" + `$($g.StartTime.ToUniversalTime().Ticks)` + "`t" + `$($g.UserProcessorTime.Ticks)` + "`t" + `$($g.PrivilegedProcessorTime.Ticks)` + "`t" + `$($g.WorkingSet64)` + "`t" + `$($g.Threads.Count)` + "`t" + `$($g.ProcessName)"
"X` + "`t" + `$i` + "`t" + `$($c.ExecutablePath)"; "C` + "`t" + `$i` + "`t" + `$($c.CommandLine -replace '[\t\r\n]', ' ')"
} else { "P` + "`t" + `$i` + "`t" + `$n` + "`t" + `$id` + "`t" + `0" }
$ids += $id; $i++ }
$w2 = $w1
if ($p.window_ms -gt 0) { Start-Sleep -Milliseconds $p.window_ms; $w2 = [DateTime]::UtcNow.Ticks; $i = 0
foreach ($id in $ids) { if ($id) { $g = Get-Process -Id $id; if ($g) { "Q` + "`t" + `$i` + "`t" + `$($g.TotalProcessorTime.Ticks)" } }; $i++ } }
"T` + "`t" + `$w1` + "`t" + `$w2"
if ($p.checks) {
` + winRun + `foreach ($k in $p.checks) {
if ($k.kind -eq 'md5') { "$($k.tag)$("$((Get-FileHash -LiteralPath $k.path -Algorithm MD5).Hash)".ToLower())"; continue }
$x = Run $k.shell $k.cmd $k.setup 10
if ($k.kind -eq 'version') { "$($k.tag)$((($x.out -split '\r?\n')[0]) -replace '\t', ' ')" } else { "$($k.tag)$($x.rc)" } } }
exit 0
`

// winSignalBody stops the probed incarnation by pid, only while its
// creation time (in ticks since the boot's whole second, as
// parseWindowsProbe counts them) still
// matches: a reused pid is never touched. Without force it asks first
// (taskkill without /F) and forces after wait_ms.
const winSignalBody = `$ErrorActionPreference = 'SilentlyContinue'
$b = (Get-CimInstance Win32_OperatingSystem).LastBootUpTime.ToUniversalTime().Ticks; $b -= $b % 10000000
$g = Get-Process -Id $p.pid
if (-not $g -or ($g.StartTime.ToUniversalTime().Ticks - $b) -ne $p.start) { exit 0 }
if (-not $p.force) { taskkill.exe /T /PID $p.pid *> $null; if ($g.WaitForExit($p.wait_ms)) { exit 0 } }
taskkill.exe /T /F /PID $p.pid *> $null
exit 0
`

type winProbe struct {
	Files    []string   `json:"files"`
	WindowMS int64      `json:"window_ms"`
	Checks   []winCheck `json:"checks,omitempty"`
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

func (windowsPlatform) statusScript(spec proc.Spec, window time.Duration, extras bool) string {
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
	return psScript("probe", p, winProbeBody)
}

func (windowsPlatform) watchScript(entries []WatchEntry, _ time.Duration, _ []string, _ *hostKnown) string {
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
	return psScript("probe", p, winProbeBody)
}

func (windowsPlatform) alive(s proc.Sample, name string) bool { return proc.AliveWindows(s, name) }

func (windowsPlatform) controlScript(spec proc.Spec, cmd string) string {
	secs := int(spec.OpTimeout.Round(time.Second) / time.Second)
	return psScript("control", struct {
		Setup    string `json:"setup"`
		Shell    string `json:"shell"`
		Cmd      string `json:"cmd"`
		TimeoutS int    `json:"timeout_s"`
	}{spec.SetupPath, string(spec.ShellExt), cmd, max(secs, 1)}, winControlBody)
}

// checkedControlScript: a Windows control command and its check stay two
// commands; each PowerShell script is already bounded by the command line.
func (windowsPlatform) checkedControlScript(proc.Spec, string, time.Duration, bool) string { return "" }

func (windowsPlatform) signalScript(pid int, startTicks uint64, sig string, wait time.Duration) string {
	return psScript("signal", struct {
		Pid    int    `json:"pid"`
		Start  uint64 `json:"start"`
		Force  bool   `json:"force"`
		WaitMS int64  `json:"wait_ms"`
	}{pid, startTicks, sig == "KILL", wait.Milliseconds()}, winSignalBody)
}

// whoami is a probe of no pid file: its host line names the user.
func (windowsPlatform) whoami() string {
	return psScript("probe", winProbe{Files: []string{}}, winProbeBody)
}

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
// expanded; a ' is written twice.
func PSQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func psNeedsQuote(s string) bool {
	return s == "" || strings.ContainsAny(s, " \t'\"`$&|;(){}@#,<>")
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

// parseWindowsProbe reads winProbeBody's output into the same HostInfo and
// Samples the Linux probe gives: times since boot in 100 ns ticks
// (ClockTicks 10^7), so start time, pid reuse and cpu% follow the same
// rules. n is the number of pid files asked for.
func parseWindowsProbe(out string, n int) (proc.HostInfo, []proc.Sample, error) {
	var host proc.HostInfo
	samples := make([]proc.Sample, n)
	second := make([]bool, n)
	q2 := make([]uint64, n)
	var boot, now, w1, w2 int64
	sawHost := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Split(strings.TrimRight(sc.Text(), "\r"), "\t")
		switch f[0] {
		case "H":
			if len(f) < 7 {
				return host, nil, fmt.Errorf("probe: short host line %q", sc.Text())
			}
			host.CPUs = atoi(f[1])
			host.MemTotal = atou(f[2])
			boot, now = atoi64(f[3]), atoi64(f[4])
			if boot <= 0 || now < boot {
				return host, nil, fmt.Errorf("probe: host line has boot %q and now %q ticks", f[3], f[4])
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
			sawHost = true
		case "P", "X", "C", "Q":
			i, s := sampleFor(f, 3, samples)
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
				if f[4] != "1" || len(f) < 11 {
					continue
				}
				created := atoi64(f[5])
				if created <= boot {
					continue // not a process of this boot: never alive
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
			}
		case "T":
			if len(f) >= 3 {
				w1, w2 = atoi64(f[1]), atoi64(f[2])
			}
		}
	}
	if err := sc.Err(); err != nil {
		return host, nil, fmt.Errorf("probe: %w", err)
	}
	if !sawHost {
		return host, nil, fmt.Errorf("probe: no host line in output")
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
