package policies

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/drover-sh/drover/proc"
)

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// NextRun is when a periodic (auto_type 0) process runs next, after the run
// at last (or, with no run yet, after from). crontab_rule wins over
// cycle_time when both are set, and is read in zone: "0 9 * * *" is nine
// o'clock there.
func NextRun(s proc.Spec, last, from time.Time, zone Zone) (time.Time, error) {
	base := from
	if !last.IsZero() {
		base = last
	}
	if s.CrontabRule != "" {
		sched, err := cronParser.Parse(s.CrontabRule)
		if err != nil {
			return time.Time{}, fmt.Errorf("crontab_rule %q: %w", s.CrontabRule, err)
		}
		return sched.Next(base.In(zone.Location())).UTC(), nil
	}
	if s.CycleTime <= 0 {
		return time.Time{}, fmt.Errorf("periodic process %s has neither cycle_time nor crontab_rule", s.ProcName)
	}
	if last.IsZero() {
		return from, nil // first run at once
	}
	return last.Add(s.CycleTime), nil
}

// Zone is the time zone crontab rules are read in, as its offset from UTC
// when it was last learned: the host's own, or the one the operator chose,
// at its current offset. A fixed offset keeps the evaluation pure (no
// time zone database in workflow code); the watch reports a new offset
// (a daylight saving change) within a poll, and rules are read again.
type Zone struct {
	// Name is for people: the host's abbreviation (CST) or the
	// operator's zone name (Asia/Shanghai).
	Name string `json:"name,omitempty"`
	// Offset is seconds east of UTC.
	Offset int `json:"offset,omitempty"`
	// Known is false until the zone was learned: rules are read in UTC.
	Known bool `json:"known,omitempty"`
}

// Location is the zone as a fixed-offset location; UTC while unknown.
func (z Zone) Location() *time.Location {
	if !z.Known {
		return time.UTC
	}
	return time.FixedZone(z.Name, z.Offset)
}

func (z Zone) String() string {
	if !z.Known {
		return "UTC (the host's zone not learned yet)"
	}
	return fmt.Sprintf("%s (UTC%s)", z.Name, time.Unix(0, 0).In(z.Location()).Format("-07:00"))
}

// HostZone reads the zone a host reports as its abbreviation followed by
// its offset, as `date +%Z%z` prints it (CST+0800, UTC+0000, +03+0300).
func HostZone(s string) (Zone, bool) {
	s = strings.TrimSpace(s)
	if len(s) < 5 {
		return Zone{}, false
	}
	off, ok := parseOffset(s[len(s)-5:])
	if !ok {
		return Zone{}, false
	}
	name := s[:len(s)-5]
	if name == "" || ((name == "UTC" || name == "GMT") && off != 0) {
		// Windows hosts report only an offset, as UTC+0800.
		name = "UTC" + s[len(s)-5:]
	}
	return Zone{Name: name, Offset: off, Known: true}, true
}

// FixedZone reads an operator's fixed offset: +08:00, -0530, UTC, Z.
func FixedZone(s string) (Zone, bool) {
	switch s {
	case "UTC", "Z":
		return Zone{Name: "UTC", Known: true}, true
	}
	off, ok := parseOffset(strings.Replace(s, ":", "", 1))
	if !ok {
		return Zone{}, false
	}
	return Zone{Name: s, Offset: off, Known: true}, true
}

// parseOffset reads ±hhmm as seconds east of UTC.
func parseOffset(s string) (int, bool) {
	if len(s) != 5 || (s[0] != '+' && s[0] != '-') {
		return 0, false
	}
	hh, err1 := strconv.Atoi(s[1:3])
	mm, err2 := strconv.Atoi(s[3:5])
	if err1 != nil || err2 != nil || hh > 14 || mm > 59 || strings.ContainsAny(s[1:], "+-") {
		return 0, false
	}
	off := hh*3600 + mm*60
	if s[0] == '-' {
		off = -off
	}
	return off, true
}

// MaxOverdueScan bounds how many overdue runs CatchUp counts: a
// cycle_time of one second over a month's outage is millions, and only
// the last MaxCatchUp of them are run.
const MaxOverdueScan = 10000

// CatchUp is what a periodic process does with the runs that fell due
// while no worker ran, next being the first of them: the last MaxCatchUp
// are run, late, one after another, and the ones before are skipped.
// skipped counts those (0: nothing to skip); from is the first skipped,
// and last and next are the process's last and next run once they are
// skipped.
func CatchUp(s proc.Spec, next, now time.Time, zone Zone) (skipped int, from, last, nextRun time.Time) {
	var overdue []time.Time
	for t := next; !t.IsZero() && !t.After(now) && len(overdue) <= MaxOverdueScan; {
		overdue = append(overdue, t)
		n, err := NextRun(s, t, now, zone)
		if err != nil {
			break
		}
		t = n
	}
	skip := len(overdue) - MaxCatchUp
	if skip <= 0 {
		return 0, time.Time{}, time.Time{}, time.Time{}
	}
	return skip, overdue[0], overdue[skip-1], overdue[skip]
}
