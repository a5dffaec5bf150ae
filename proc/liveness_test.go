package proc

import "testing"

func TestAlive(t *testing.T) {
	live := Sample{PidFileFound: true, Pid: 42, Exists: true, State: "S"}
	with := func(f func(*Sample)) Sample { s := live; f(&s); return s }
	cases := []struct {
		name string
		s    Sample
		proc string
		want bool
	}{
		{"exe matches", with(func(s *Sample) { s.Exe = "/data/app/proc-test" }), "proc-test", true},
		{"deleted exe still matches", with(func(s *Sample) { s.Exe = "/data/app/proc-test (deleted)" }), "proc-test", true},
		{"argv0 matches when exe unreadable", with(func(s *Sample) { s.Argv0 = "./proc-test" }), "proc-test", true},
		{"interpreter runs the script", with(func(s *Sample) { s.Exe = "/usr/bin/dash"; s.Argv0 = "sh"; s.Argv1 = "/data/app/run.sh" }), "run.sh", true},
		{"interpreter runs another script", with(func(s *Sample) { s.Exe = "/usr/bin/dash"; s.Argv0 = "sh"; s.Argv1 = "/data/app/other.sh" }), "run.sh", false},
		{"reused pid belongs to another program", with(func(s *Sample) { s.Exe = "/usr/bin/sleep"; s.Argv0 = "sleep"; s.Argv1 = "1000" }), "proc-test", false},
		{"argument equal to the name is not enough", with(func(s *Sample) { s.Exe = "/usr/bin/sleep"; s.Argv0 = "sleep"; s.Argv1 = "proc-test" }), "proc-test", false},
		{"no pid file", Sample{}, "proc-test", false},
		{"pid gone", with(func(s *Sample) { s.Exists = false; s.Exe = "/x/proc-test" }), "proc-test", false},
		{"zombie", with(func(s *Sample) { s.State = "Z"; s.Exe = "/x/proc-test" }), "proc-test", false},
		{"empty pid file", Sample{PidFileFound: true}, "proc-test", false},
		{"empty proc name", with(func(s *Sample) { s.Exe = "/x/y" }), "", false},
	}
	for _, c := range cases {
		if got := Alive(c.s, c.proc); got != c.want {
			t.Errorf("%s: Alive = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSameIncarnation(t *testing.T) {
	s := Sample{StartTicks: 1234}
	if !SameIncarnation(s, 1234) || SameIncarnation(s, 1235) || SameIncarnation(s, 0) {
		t.Fatal("SameIncarnation must match exactly the recorded, non-zero start time")
	}
}

func TestCPUAndMemPercent(t *testing.T) {
	h := HostInfo{CPUs: 4, ClockTicks: 100, MemTotal: 1000, BootTime: 1000, Now: 1100}
	// One core busy out of four over the window is 25 % of the host.
	if got := CPUPercent(Sample{CPUTicksDelta: 20, HostTicksDelta: 80}); got != 25 {
		t.Fatalf("CPUPercent = %v, want 25", got)
	}
	if got := CPUPercent(Sample{CPUTicksDelta: 5}); got != 0 {
		t.Fatalf("CPUPercent without a window = %v, want 0", got)
	}
	if got := CPUPercent(Sample{CPUTicksDelta: 90, HostTicksDelta: 80}); got != 100 {
		t.Fatalf("CPUPercent clamps to 100, got %v", got)
	}
	// Started at boot+50s (5000 ticks), now boot+100s: 50 s elapsed; 100 s
	// of CPU over 4 cores and 50 s is 50 %.
	s := Sample{StartTicks: 5000, UTime: 6000, STime: 4000, RSSBytes: 250}
	if got := ElapsedSeconds(s, h); got != 50 {
		t.Fatalf("ElapsedSeconds = %d", got)
	}
	if got := CPUPercentLifetime(s, h); got != 50 {
		t.Fatalf("CPUPercentLifetime = %v, want 50", got)
	}
	if got := MemPercent(s, h); got != 25 {
		t.Fatalf("MemPercent = %v", got)
	}
	if got := StartUnix(s, h); got != 1050 {
		t.Fatalf("StartUnix = %d", got)
	}
}

func TestBuildStatusNotRunning(t *testing.T) {
	c := BuildStatus(Target{CloudID: 2, IP: "10.0.0.1"}, Spec{ProcName: "p"}, HostInfo{Now: 1700000000, Timezone: "UTC+0000"}, Sample{}, false, Registration{}, StatusExtras{})
	inst := c.Process[0].Instance[0]
	if inst.Pid != -1 || c.Process[0].ProcName != "p" || c.IP != "10.0.0.1" || c.UTCTime != "2023-11-14 22:13:20" ||
		c.AgentID != "2:10.0.0.1" || inst.Health != "0" || inst.StartTime != "" {
		t.Fatalf("unexpected status content %+v", c)
	}
}

func TestBuildStatusZone(t *testing.T) {
	for _, c := range []struct {
		zone  string
		hours int
		local string
	}{
		{"UTC+0800", 8, "2023-11-15T06:13:20+08:00"},
		{"UTC-0530", -5, "2023-11-14T16:43:20-05:30"},
		{"UTC+0000", 0, "2023-11-14T22:13:20Z"},
		{"", 0, "2023-11-14T22:13:20Z"},
		{"garbage", 0, "2023-11-14T22:13:20Z"},
	} {
		got := BuildStatus(Target{IP: "10.0.0.1", AgentID: "abc"}, Spec{ProcName: "p"}, HostInfo{Now: 1700000000, Timezone: c.zone}, Sample{}, false, Registration{}, StatusExtras{})
		if got.Timezone != c.hours || got.UTCTime2 != c.local || got.AgentID != "abc" {
			t.Errorf("zone %q: timezone %d utctime2 %q agent %q; want %d %q abc", c.zone, got.Timezone, got.UTCTime2, got.AgentID, c.hours, c.local)
		}
	}
}

func TestAliveWindows(t *testing.T) {
	live := Sample{PidFileFound: true, Pid: 4012, Exists: true, Exe: `C:\Program Files\App\Svc.EXE`, Argv0: "Svc"}
	for _, c := range []struct {
		s    Sample
		name string
		want bool
	}{
		{live, "svc", true},
		{live, "svc.exe", true},
		{live, "SVC", true},
		{live, "other", false},
		{Sample{PidFileFound: true, Pid: 4012, Exists: true, Argv0: "svc"}, "svc.exe", true},
		{Sample{PidFileFound: true, Pid: 4012, Exists: false, Exe: `C:\a\svc.exe`}, "svc", false},
		{Sample{PidFileFound: false, Pid: 4012, Exists: true, Exe: `C:\a\svc.exe`}, "svc", false},
		{Sample{PidFileFound: true, Pid: 4012, Exists: true, Exe: `C:\a\notepad.exe`, Argv0: "notepad"}, "svc", false},
	} {
		if got := AliveWindows(c.s, c.name); got != c.want {
			t.Errorf("AliveWindows(%+v, %q) = %v, want %v", c.s, c.name, got, c.want)
		}
	}
}
