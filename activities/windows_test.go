package activities

import (
	"encoding/json"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
	"github.com/drover-sh/drover/transport/psenc"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/windows/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestParseWindowsProbeStatus(t *testing.T) {
	host, s, err := parseWindowsProbe(fixture(t, "probe_status.txt"), 1)
	if err != nil {
		t.Fatal(err)
	}
	// Boot 2026-11-20 03:12:45.5 UTC, now 05:17:44.25 two days later.
	if host.CPUs != 8 || host.MemTotal != 17179332608 || host.BootTime != 1795144365 || host.Now != 1795324664 ||
		host.Timezone != "UTC+0800" || host.User != "Administrator" || host.ClockTicks != 10_000_000 {
		t.Fatalf("host %+v", host)
	}
	p := s[0]
	if !p.PidFileFound || !p.Exists || p.Pid != 6312 || p.Threads != 14 || p.RSSBytes != 268435456 ||
		p.Exe != `C:\Program Files\nginx\nginx.exe` || p.Cmdline != `"C:\Program Files\nginx\nginx.exe" -p "C:\Program Files\nginx"` {
		t.Fatalf("sample %+v", p)
	}
	if !proc.AliveWindows(p, "nginx") || !proc.AliveWindows(p, "nginx.exe") || proc.AliveWindows(p, "httpd") {
		t.Fatal("liveness by executable name")
	}
	// Created 04:00:00.123456 UTC: the start time in unix seconds is exact.
	if got := proc.StartUnix(p, host); got != 1795320000 {
		t.Fatalf("start %d, want 1795320000", got)
	}
	// 80 ms of cpu over a 200 ms window on 8 processors: 5 %.
	if got := proc.CPUPercent(p); !near(got, 5) {
		t.Fatalf("cpu %v%%, want 5", got)
	}
	if got := proc.MemPercent(p, host); !near(got, 100*268435456.0/17179332608) {
		t.Fatalf("mem %v%%", got)
	}
	// 15 s of cpu over 4664 s on 8 processors since it started.
	if got := proc.CPUPercentLifetime(p, host); !near(got, 100*15.0/(4664*8)) {
		t.Fatalf("lifetime cpu %v%%", got)
	}
	ex := parseExtras(fixture(t, "probe_status.txt"))
	if ex.Version != "nginx version: nginx/1.27.2" || !ex.Healthy {
		t.Fatalf("extras %+v", ex)
	}
	st := proc.BuildStatus(proc.Target{IP: "10.0.0.9"}, proc.Spec{ProcName: "nginx"}, host, p, true, proc.Registration{}, ex)
	if inst := st.Process[0].Instance[0]; inst.Pid != 6312 || inst.StartTime != "1795320000" || inst.ElapsedTime != 4664 || inst.UsePhyMem != 268435456 || inst.Health != "1" {
		t.Fatalf("status instance %+v", inst)
	}
}

func TestParseWindowsProbeWatch(t *testing.T) {
	out := fixture(t, "probe_watch.txt")
	host, s, err := parseWindowsProbe(out, 3)
	if err != nil {
		t.Fatal(err)
	}
	if host.User != `CORP\svc-deploy` || host.Timezone != "UTC-0500" || host.Ticks != uint64(639309214642500000-639307411650000000)*4 {
		t.Fatalf("host %+v", host)
	}
	// The pid is live but it is notepad: a reused pid is not the process.
	if !s[0].Exists || proc.AliveWindows(s[0], "svc") || s[0].CPUTicksDelta != 0 {
		t.Fatalf("reused pid %+v", s[0])
	}
	if s[1].PidFileFound || s[1].Exists || !s[2].PidFileFound || s[2].Exists || s[2].Pid != 7720 {
		t.Fatalf("missing pid file %+v, dead pid %+v", s[1], s[2])
	}

	// The watcher reads the same output: every resident entry is dead.
	spec := func(name string) proc.Spec {
		return proc.Spec{ProcName: name, PidPath: `C:\app\` + name + ".pid", AutoType: proc.AutoResident, ShellExt: proc.ShellBat}
	}
	w := newWatcher(WatchInput{Entries: []WatchEntry{{Spec: spec("svc")}, {Spec: spec("a")}, {Spec: spec("b")}}}, windowsPlatform{login: "svc-deploy"})
	ev := w.observe(out)
	if len(ev) != 3 || ev[0].Kind != WatchDead || ev[2].Kind != WatchDead {
		t.Fatalf("events %+v", ev)
	}

	if _, _, err := parseWindowsProbe("P\t0\t1\t4\t0\r\n", 1); err == nil {
		t.Fatal("output without a host line must be refused")
	}
}

// paramBlock is a ps1 script's param block; paramName each parameter.
var (
	paramBlock = regexp.MustCompile(`(?m)^param\((.*)\)$`)
	paramName  = regexp.MustCompile(`\$\w+`)
)

// TestWindowsScriptsCarryRequestTextOnlyAsData: each script is its file's
// fixed text, with a param block for its arguments, and request text
// reaches the host only as arguments, which read back as they were.
func TestWindowsScriptsCarryRequestTextOnlyAsData(t *testing.T) {
	w := windowsPlatform{login: "Administrator"}
	evil := "x'; Remove-Item -Recurse C:\\ ; '$(whoami)\u2019 \" & del /q *"
	spec := policies.WithDefaults(proc.Spec{ProcName: "svc", SetupPath: `C:\Program Files\it's app`, PidPath: `C:\run\svc.pid`,
		ShellExt: proc.ShellPS1, OpTimeout: 30 * time.Second, VersionCmd: evil, HealthCmd: "exit 0"})
	for name, c := range map[string]transport.Command{
		"control": w.controlScript(spec, evil, opMark{}, nil),
		"probe":   w.statusScript(spec, 200*time.Millisecond, true, nil, ""),
		"signal":  w.signalScript(opMark{}, 4012, 99, "TERM", 5*time.Second),
	} {
		if c.Name != name || c.Script != scripts[name+".ps1"] {
			t.Fatalf("%s: not the script file's text: %q", name, c.Name)
		}
		// powershell's exit code is otherwise whether the last statement
		// succeeded: every script ends it explicitly.
		if !strings.HasSuffix(c.Script, "\nexit 0\n") {
			t.Fatalf("%s does not end with exit 0", name)
		}
		if !strings.HasPrefix(c.Script, "param(") {
			t.Fatalf("%s does not start with its param block", name)
		}
		params := paramName.FindAllString(paramBlock.FindStringSubmatch(c.Script)[1], -1)
		if name != "probe" && len(params) != len(c.Args) {
			t.Fatalf("%s: %d parameters %v for %d arguments", name, len(params), params, len(c.Args))
		}
		inv := psenc.Invocation(c.Name, c.Script, c.Args)
		gotName, gotScript, args, ok := psenc.ParseInvocation(inv)
		if !ok || gotName != name || gotScript != c.Script || strings.Join(args, "|") != strings.Join(c.Args, "|") {
			t.Fatalf("%s: the invocation does not read back: %q", name, args)
		}
		switch name {
		case "control":
			if strings.Join(c.Args, "|") != strings.Join([]string{spec.SetupPath, "ps1", evil, "30"}, "|") {
				t.Fatalf("control arguments %q", c.Args)
			}
		case "probe":
			var checks []winCheck
			if err := json.Unmarshal([]byte(c.Args[1]), &checks); err != nil {
				t.Fatal(err)
			}
			if c.Args[0] != "200" || len(checks) != 2 || checks[0].Cmd != evil || len(c.Args) != 3 || c.Args[2] != spec.PidPath {
				t.Fatalf("probe arguments %q", c.Args)
			}
		case "signal":
			if strings.Join(c.Args, " ") != "4012 99 0 5000" {
				t.Fatalf("signal arguments %q", c.Args)
			}
		}
	}
	if c := w.signalScript(opMark{}, 4012, 99, "KILL", 0); c.Args[2] != "1" {
		t.Fatalf("KILL must force: %q", c.Args)
	}
	if c := w.whoami(); c.Name != "probe" || strings.Join(c.Args, "|") != "0|" {
		t.Fatalf("whoami is a probe of no pid file: %q", c.Args)
	}
}

func TestWindowsScriptsFitACommandLine(t *testing.T) {
	w := windowsPlatform{login: "Administrator"}
	long := strings.Repeat("x", 1000)
	spec := policies.WithDefaults(proc.Spec{ProcName: "svc", SetupPath: `C:\app\` + long[:200], PidPath: `C:\app\svc.pid`, ShellExt: proc.ShellBat,
		VersionCmd: long[:300], HealthCmd: long[:300]})
	var entries []WatchEntry
	for i := 0; i < 8; i++ {
		e := WatchEntry{Spec: spec}
		e.Spec.ConfigMap = []proc.ConfigFile{{Path: `C:\app\conf\app.conf`, MD5: "d41d8cd98f00b204e9800998ecf8427e"}}
		entries = append(entries, e)
	}
	for name, c := range map[string]transport.Command{
		"control": w.controlScript(spec, long, opMark{}, nil),
		"status":  w.statusScript(spec, time.Second, true, nil, ""),
		"signal":  w.signalScript(opMark{}, 1, 1, "TERM", time.Second),
		"watch":   w.watchScript(entries[:2], policies.HealthCheckTimeout, nil, nil),
	} {
		// cmd.exe's 8191 is the limit of a WinRM command line.
		c.Shell = transport.ShellPowerShell
		if _, err := transport.WindowsCommandLine(c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestWindowsDefaultCommands(t *testing.T) {
	w := windowsPlatform{}
	for _, c := range []struct {
		ext             proc.ShellExt
		setup, name     string
		verb, want      string
		wantRestartVerb string
	}{
		{proc.ShellBat, `C:\gse\app`, "svc", "start", `C:\gse\app\start.bat svc`, ""},
		{proc.ShellBat, `C:\gse\app\`, "svc", "stop", `C:\gse\app\stop.bat svc`, ""},
		{proc.ShellBat, `C:\Program Files\app`, "my svc", "start", `"C:\Program Files\app\start.bat" "my svc"`, ""},
		{proc.ShellPS1, `C:\gse\app`, "svc", "reload", `C:\gse\app\reload.ps1 svc`, ""},
		{proc.ShellPS1, `C:\Program Files\o'neil`, "svc", "start", `& 'C:\Program Files\o''neil\start.ps1' 'svc'`, ""},
	} {
		got := w.defaultCommand(c.verb, proc.Spec{ShellExt: c.ext, SetupPath: c.setup, ProcName: c.name})
		if got != c.want || strings.Contains(got, "./") || strings.HasSuffix(got, "&") {
			t.Errorf("%s %s %q: %s, want %s", c.ext, c.verb, c.setup, got, c.want)
		}
	}
	// A spec without commands follows the convention for every verb.
	spec := proc.Spec{ShellExt: proc.ShellBat, SetupPath: `C:\app`, ProcName: "svc"}
	if got := commandFor(w, "kill", spec); got != `C:\app\kill.bat svc` {
		t.Fatalf("kill: %s", got)
	}
}

func TestWindowsAccountAndShellFit(t *testing.T) {
	w := platformFor(inventory.Host{Transport: inventory.TransportWinRM, User: "Administrator"})
	root := policies.WithDefaults(proc.Spec{ShellExt: proc.ShellBat})
	// GSE's default account root means the WinRM login on Windows.
	if w.account(root) != "" || !w.ranAs("administrator", root) || w.ranAs("svc", root) {
		t.Fatal("default account is the login")
	}
	svc := proc.Spec{Account: `CORP\svc`, ShellExt: proc.ShellPS1}
	if w.account(svc) != `CORP\svc` || !w.ranAs("svc", svc) || w.ranAs("Administrator", svc) {
		t.Fatal("a named account")
	}
	if w.fits(root) != "" || w.fits(proc.Spec{ShellExt: proc.ShellSh}) == "" {
		t.Fatal("bat and ps1 fit Windows, sh does not")
	}
	// cmd.exe cannot keep " or % literal: default bat commands refuse them,
	// a caller's own commands and ps1 quote them.
	pct := proc.Spec{ShellExt: proc.ShellBat, SetupPath: `C:\100%\app`, ProcName: "svc"}
	if why := w.fits(pct); !strings.Contains(why, "setup_path") {
		t.Fatalf("%% in a bat default command: %q", why)
	}
	pct.StartCmd = "start.bat"
	if w.fits(pct) != "" {
		t.Fatal("a caller's own bat command is the caller's")
	}
	if w.fits(proc.Spec{ShellExt: proc.ShellPS1, SetupPath: `C:\100%\"app"`, ProcName: "svc"}) != "" {
		t.Fatal("ps1 quotes anything")
	}
	l := platformFor(inventory.Host{Transport: inventory.TransportSSH})
	if l.fits(root) == "" || l.fits(proc.Spec{ShellExt: proc.ShellSh}) != "" || l.shell() != transport.ShellSh || w.shell() != transport.ShellPowerShell {
		t.Fatal("sh fits Linux, bat does not")
	}
}
