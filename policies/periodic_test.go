package policies

import (
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
)

// TestNextRunReadsCrontabInTheZone: "0 9 * * *" is nine o'clock in the
// zone supervision reads rules in; cycle_time does not depend on it.
func TestNextRunReadsCrontabInTheZone(t *testing.T) {
	from := time.Date(2026, 11, 23, 0, 30, 0, 0, time.UTC)
	nine := proc.Spec{ProcName: "p", CrontabRule: "0 9 * * *"}
	shanghai, _ := HostZone("CST+0800")
	newYork, _ := HostZone("EST-0500")
	india, _ := FixedZone("+05:30")
	cases := []struct {
		name string
		zone Zone
		want time.Time
	}{
		{"not learned yet: UTC", Zone{}, time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)},
		{"UTC+8: 01:00 UTC", shanghai, time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)},
		{"UTC-5: 14:00 UTC", newYork, time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)},
		{"UTC+5:30: 03:30 UTC", india, time.Date(2026, 11, 23, 3, 30, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		got, err := NextRun(nine, time.Time{}, from, c.zone)
		if err != nil || !got.Equal(c.want) || got.Location() != time.UTC {
			t.Errorf("%s: %s (%v), want %s", c.name, got, err, c.want)
		}
	}
	cycle := proc.Spec{ProcName: "p", CycleTime: time.Hour}
	if got, _ := NextRun(cycle, from, from, shanghai); !got.Equal(from.Add(time.Hour)) {
		t.Errorf("cycle_time in a zone: %s", got)
	}
}

func TestHostZone(t *testing.T) {
	cases := []struct {
		in     string
		ok     bool
		name   string
		offset int
	}{
		{"CST+0800", true, "CST", 8 * 3600},
		{"UTC+0000", true, "UTC", 0},
		{"EST-0500", true, "EST", -5 * 3600},
		{"IST+0530", true, "IST", 5*3600 + 30*60},
		{"+03+0300", true, "+03", 3 * 3600},
		{"UTC+0800", true, "UTC+0800", 8 * 3600}, // a Windows host: only the offset
		{"+0100", true, "UTC+0100", 3600},
		{"", false, "", 0},
		{"CST", false, "", 0},
		{"CST+08", false, "", 0},
		{"CST+2500", false, "", 0},
		{"CST+08x0", false, "", 0},
		{"CST+0-10", false, "", 0},
	}
	for _, c := range cases {
		z, ok := HostZone(c.in)
		if ok != c.ok || (ok && (z.Name != c.name || z.Offset != c.offset || !z.Known)) {
			t.Errorf("HostZone(%q) = %+v, %v; want %q %d %v", c.in, z, ok, c.name, c.offset, c.ok)
		}
	}
}

func TestFixedZone(t *testing.T) {
	for in, want := range map[string]int{"UTC": 0, "Z": 0, "+08:00": 8 * 3600, "-0330": -(3*3600 + 30*60), "+14:00": 14 * 3600} {
		if z, ok := FixedZone(in); !ok || z.Offset != want || !z.Known {
			t.Errorf("FixedZone(%q) = %+v, %v; want offset %d", in, z, ok, want)
		}
	}
	for _, in := range []string{"", "Asia/Shanghai", "+8", "+08:60", "08:00", "+15:00"} {
		if z, ok := FixedZone(in); ok {
			t.Errorf("FixedZone(%q) = %+v: not a fixed offset", in, z)
		}
	}
}

func TestCatchUp(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	every := proc.Spec{ProcName: "p", CycleTime: time.Minute}
	for _, tc := range []struct {
		name     string
		next     time.Time
		skipped  int
		from     time.Time
		last     time.Time
		nextRun  time.Time
		spec     proc.Spec
		nowAfter time.Duration
	}{
		{name: "nothing due", spec: every, next: at.Add(time.Minute)},
		{name: "as many due as are run", spec: every, next: at, nowAfter: time.Duration(MaxCatchUp-1) * time.Minute},
		{name: "one more than are run", spec: every, next: at, nowAfter: time.Duration(MaxCatchUp) * time.Minute,
			skipped: 1, from: at, last: at, nextRun: at.Add(time.Minute)},
		{name: "an hour down", spec: every, next: at, nowAfter: time.Hour,
			skipped: 61 - MaxCatchUp, from: at, last: at.Add(time.Duration(60-MaxCatchUp) * time.Minute), nextRun: at.Add(time.Duration(61-MaxCatchUp) * time.Minute)},
		{name: "the scan is bounded", spec: proc.Spec{ProcName: "p", CycleTime: time.Second}, next: at, nowAfter: 30 * 24 * time.Hour,
			skipped: MaxOverdueScan + 1 - MaxCatchUp, from: at, last: at.Add(time.Duration(MaxOverdueScan-MaxCatchUp) * time.Second),
			nextRun: at.Add(time.Duration(MaxOverdueScan+1-MaxCatchUp) * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			skipped, from, last, next := CatchUp(tc.spec, tc.next, at.Add(tc.nowAfter), Zone{})
			if skipped != tc.skipped || !from.Equal(tc.from) || !last.Equal(tc.last) || !next.Equal(tc.nextRun) {
				t.Fatalf("CatchUp = %d %s %s %s, want %d %s %s %s", skipped, from, last, next, tc.skipped, tc.from, tc.last, tc.nextRun)
			}
		})
	}
}
