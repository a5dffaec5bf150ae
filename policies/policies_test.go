package policies

import (
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
)

func TestLimitPolicy(t *testing.T) {
	p := LimitPolicy{CPU: 50, Mem: 10, Polls: 3}
	type step struct {
		cpu, mem float64
		over     int
		exceeded bool
		which    string
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"under both", []step{{10, 1, 0, false, ""}, {49.9, 9.9, 0, false, ""}}},
		{"three over in a row", []step{{60, 1, 1, false, "cpu"}, {60, 1, 2, false, "cpu"}, {60, 1, 0, true, "cpu"}}},
		{"a dip resets", []step{{60, 1, 1, false, "cpu"}, {10, 1, 0, false, ""}, {60, 1, 1, false, "cpu"}}},
		{"mem counts too", []step{{0, 11, 1, false, "mem"}, {0, 11, 2, false, "mem"}, {0, 11, 0, true, "mem"}}},
		{"cpu and mem mixed", []step{{60, 1, 1, false, "cpu"}, {0, 20, 2, false, "mem"}, {60, 20, 0, true, "cpu"}}},
		{"exactly the limit is not over", []step{{50, 10, 0, false, ""}}},
	}
	for _, c := range cases {
		st := LimitState{}
		for i, s := range c.steps {
			v := p.Observe(st, s.cpu, s.mem)
			if v.State.Over != s.over || v.Exceeded != s.exceeded || v.Which != s.which {
				t.Fatalf("%s step %d: %+v, want over %d exceeded %v which %q", c.name, i, v, s.over, s.exceeded, s.which)
			}
			st = v.State
		}
	}
	if v := (LimitPolicy{}).Observe(LimitState{}, 100, 100); v.Exceeded || v.State.Over != 0 {
		t.Fatalf("no limits set must never act: %+v", v)
	}
	if v := (LimitPolicy{CPU: 1}).Observe(LimitState{Over: DefaultLimitPolls - 1}, 2, 0); !v.Exceeded {
		t.Fatalf("zero Polls means the default %d", DefaultLimitPolls)
	}
}

func TestCPUPercentBetween(t *testing.T) {
	cases := []struct {
		pb, pa, hb, ha uint64
		want           float64
	}{
		{100, 150, 1000, 1200, 25},
		{100, 100, 1000, 1200, 0},
		{100, 150, 1000, 1000, 0}, // no host time passed
		{150, 100, 1000, 1200, 0}, // counter went back: a new process
		{0, 500, 0, 100, 100},     // clamped
	}
	for _, c := range cases {
		if got := CPUPercentBetween(c.pb, c.pa, c.hb, c.ha); got != c.want {
			t.Errorf("%+v: %v, want %v", c, got, c.want)
		}
	}
}

func TestNextRun(t *testing.T) {
	from := time.Date(2026, 11, 22, 10, 0, 30, 0, time.UTC)
	cycle := proc.Spec{ProcName: "p", CycleTime: time.Minute}
	if got, _ := NextRun(cycle, time.Time{}, from, Zone{}); !got.Equal(from) {
		t.Fatalf("first cycle run must be at once, got %s", got)
	}
	last := from.Add(-10 * time.Second)
	if got, _ := NextRun(cycle, last, from, Zone{}); !got.Equal(last.Add(time.Minute)) {
		t.Fatalf("next cycle run %s", got)
	}
	cronSpec := proc.Spec{ProcName: "p", CrontabRule: "*/5 * * * *", CycleTime: time.Minute}
	if got, _ := NextRun(cronSpec, time.Time{}, from, Zone{}); !got.Equal(time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC)) {
		t.Fatalf("cron wins over cycle_time: %s", got)
	}
	if got, _ := NextRun(proc.Spec{CrontabRule: "@every 30s"}, from, from, Zone{}); !got.Equal(from.Add(30 * time.Second)) {
		t.Fatalf("@every: %s", got)
	}
	if _, err := NextRun(proc.Spec{ProcName: "p"}, time.Time{}, from, Zone{}); err == nil {
		t.Fatal("a periodic spec with no schedule is an error")
	}
	if _, err := NextRun(proc.Spec{CrontabRule: "bogus"}, time.Time{}, from, Zone{}); err == nil {
		t.Fatal("a bad rule is an error")
	}
}

func TestWithDefaultsTreatsZeroAsDefault(t *testing.T) {
	s := WithDefaults(proc.Spec{})
	if s.StartCheck != DefaultStartCheck || s.StopCheck != DefaultStopCheck || s.OpTimeout != DefaultOpTimeout ||
		s.StartRetries != DefaultStartRetries || s.StartInterval != DefaultStartInterval || s.Account != "root" || s.ShellExt != proc.ShellSh {
		t.Fatalf("defaults %+v", s)
	}
	kept := WithDefaults(proc.Spec{StartCheck: time.Second, Account: "app", OpTimeout: 3 * time.Second})
	if kept.StartCheck != time.Second || kept.Account != "app" || kept.OpTimeout != 3*time.Second {
		t.Fatalf("set values must be kept: %+v", kept)
	}
}

func TestHostOpDeadlineCoversTheOp(t *testing.T) {
	s := WithDefaults(proc.Spec{})
	for _, op := range []proc.OpType{proc.OpStart, proc.OpStop, proc.OpStatus, proc.OpRestart, proc.OpReload, proc.OpKill} {
		if d := HostOpDeadline(op, s); d <= s.OpTimeout {
			t.Errorf("%s: deadline %s does not exceed op_timeout %s", op, d, s.OpTimeout)
		}
	}
	if HostOpDeadline(proc.OpRestart, s) <= HostOpDeadline(proc.OpStart, s) {
		t.Error("restart (stop then start) needs longer than start")
	}
}

func TestStatusProbeTimeout(t *testing.T) {
	for _, c := range []struct{ op, want time.Duration }{
		{0, StatusProbeMax},
		{-time.Second, StatusProbeMax},
		{3 * time.Second, 3 * time.Second},
		{StatusProbeMax, StatusProbeMax},
		{10 * time.Minute, StatusProbeMax},
	} {
		if got := StatusProbeTimeout(c.op); got != c.want {
			t.Errorf("StatusProbeTimeout(%s) = %s, want %s", c.op, got, c.want)
		}
	}
	// A batch outlives any one probe in it, with room for its registry reads.
	if StatusBatchDeadline < StatusProbeMax+30*time.Second {
		t.Errorf("batch deadline %s leaves no room past a probe's %s", StatusBatchDeadline, StatusProbeMax)
	}
}
