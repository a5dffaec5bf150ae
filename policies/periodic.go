package policies

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/drover-sh/drover/proc"
)

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// NextRun is when a periodic (auto_type 0) process runs next, after the run
// at last (or, with no run yet, after from). crontab_rule wins over
// cycle_time when both are set.
func NextRun(s proc.Spec, last, from time.Time) (time.Time, error) {
	base := from
	if !last.IsZero() {
		base = last
	}
	if s.CrontabRule != "" {
		sched, err := cronParser.Parse(s.CrontabRule)
		if err != nil {
			return time.Time{}, fmt.Errorf("crontab_rule %q: %w", s.CrontabRule, err)
		}
		return sched.Next(base), nil
	}
	if s.CycleTime <= 0 {
		return time.Time{}, fmt.Errorf("periodic process %s has neither cycle_time nor crontab_rule", s.ProcName)
	}
	if last.IsZero() {
		return from, nil // first run at once
	}
	return last.Add(s.CycleTime), nil
}
