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

func TestWorkerStopTimeoutOutlastsEveryOp(t *testing.T) {
	for _, c := range []struct{ opTimeout, check time.Duration }{
		{0, 0},
		{time.Minute, 5 * time.Second},
		{24 * time.Hour, 24 * time.Hour},
	} {
		stop := WorkerStopTimeout(c.opTimeout, c.check)
		s := WithDefaults(proc.Spec{OpTimeout: c.opTimeout, StartCheck: c.check, StopCheck: c.check})
		for _, op := range []proc.OpType{proc.OpStart, proc.OpStop, proc.OpStatus, proc.OpRestart, proc.OpReload, proc.OpKill} {
			if d := HostOpDeadline(op, s); stop < d+WorkerStopMargin {
				t.Errorf("op_timeout %s, checks %s: %s deadline %s, stop timeout %s leaves no margin", c.opTimeout, c.check, op, d, stop)
			}
		}
		if stop < StatusBatchDeadline+WorkerStopMargin {
			t.Errorf("stop timeout %s is shorter than a status batch", stop)
		}
	}
	// Bounds of one day each: a restart may run four days (stop, start, both checks).
	if got, want := WorkerStopTimeout(24*time.Hour, 24*time.Hour), 4*24*time.Hour+15*time.Second+WorkerStopMargin; got != want {
		t.Errorf("stop timeout for one-day bounds %s, want %s", got, want)
	}
}

func TestDeadlinesWaitForTheTasksOwnOpsAheadOnTheHost(t *testing.T) {
	issued := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	short := proc.Spec{OpTimeout: time.Second, StartCheck: time.Second}
	a := proc.Target{IP: "10.0.0.1"}
	b := proc.Target{IP: "10.0.0.2"}
	items := []proc.Item{
		{Target: a, Spec: &short},
		{Target: b, Spec: &short},
		{Target: a},               // registered spec: the defaults bound it
		{Target: a, Spec: &short}, // behind both on host a
	}
	got := Deadlines(issued, proc.OpStart, items)
	shortBound := HostOpDeadline(proc.OpStart, WithDefaults(short)) // 1 s + 15 s + 1 s
	defBound := HostOpDeadline(proc.OpStart, WithDefaults(proc.Spec{}))
	allowed := issued.Add(DeliveryAllowance)
	want := []time.Time{
		allowed.Add(shortBound),
		allowed.Add(shortBound),
		allowed.Add(shortBound + defBound),
		allowed.Add(shortBound + defBound + shortBound),
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Errorf("item %d: deadline %s, want %s", i, got[i].Sub(issued), want[i].Sub(issued))
		}
	}
	if shortBound != 17*time.Second {
		t.Fatalf("a start with op_timeout 1 s and start check 1 s is bounded by %s, want 17s", shortBound)
	}
}

func TestDeadlinePassed(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		deadline time.Time
		want     bool
	}{
		{time.Time{}, false},          // a request from before deadlines
		{now.Add(time.Second), false}, // still in time
		{now, false},                  // at the deadline: still runs
		{now.Add(-time.Second), true}, // dequeued too late
	}
	for _, c := range cases {
		if got := Passed(c.deadline, now); got != c.want {
			t.Errorf("deadline %v: passed %v, want %v", c.deadline, got, c.want)
		}
	}
}

// TestTaskDeadlinesAllowForTheWholeTask: a chunk of a 10,000-item task
// allows for the whole task's delivery, not its own 500 items'; a small
// task keeps the plain allowance.
func TestTaskDeadlinesAllowForTheWholeTask(t *testing.T) {
	issued := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	items := []proc.Item{{Target: proc.Target{IP: "10.0.0.1"}}}
	own := HostOpDeadline(proc.OpStart, WithDefaults(proc.Spec{}))
	if got, want := TaskDeadlines(issued, proc.OpStart, items, 10000)[0], issued.Add(DeliveryAllowance+MaxDeliveryExtra+own); !got.Equal(want) {
		t.Fatalf("chunk of 10,000: deadline %s after issue, want %s", got.Sub(issued), want.Sub(issued))
	}
	if got, want := TaskDeadlines(issued, proc.OpStart, items, 1000)[0], issued.Add(DeliveryAllowance+10*DeliveryPerHundred+own); !got.Equal(want) {
		t.Fatalf("chunk of 1,000: deadline %s after issue, want %s", got.Sub(issued), want.Sub(issued))
	}
	if got, want := Deadlines(issued, proc.OpStart, items)[0], issued.Add(DeliveryAllowance+own); !got.Equal(want) {
		t.Fatalf("one item: deadline %s after issue, want %s", got.Sub(issued), want.Sub(issued))
	}
}
