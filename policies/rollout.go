package policies

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Size is a number of hosts, given as a count or as a percentage of the
// rollout's hosts. The zero value is a count of 0.
type Size struct {
	Count   int     `json:"count,omitempty"`
	Percent float64 `json:"percent,omitempty"`
}

// ParseSize reads "5" or "10%" (a percentage may have decimals).
func ParseSize(field, s string) (Size, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 100 {
			return Size{}, fmt.Errorf("%s %q: a percentage must be a number from 0 to 100 followed by %%", field, s)
		}
		return Size{Percent: f}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return Size{}, fmt.Errorf("%s %q: must be a count of hosts (0 or more) or a percentage like 10%%", field, s)
	}
	return Size{Count: n}, nil
}

// String is the size as ParseSize reads it.
func (s Size) String() string {
	if s.Percent > 0 {
		return strconv.FormatFloat(s.Percent, 'f', -1, 64) + "%"
	}
	return strconv.Itoa(s.Count)
}

// Of is the size among total hosts; a percentage rounds up, so 10% of 5
// hosts is 1 host, never 0.
func (s Size) Of(total int) int {
	if s.Percent > 0 {
		return int(math.Ceil(float64(total) * s.Percent / 100))
	}
	return s.Count
}

// UnmarshalJSON takes a count (5), or a count or a percentage in a string
// ("5", "10%"), as an HTTP caller writes it.
func (s *Size) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		if i, err := strconv.Atoi(n.String()); err == nil && i >= 0 {
			*s = Size{Count: i}
			return nil
		}
		return fmt.Errorf("%s is not a count of hosts (0 or more)", n)
	}
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		v, err := ParseSize("", str)
		if err != nil {
			return fmt.Errorf("%q is not a count of hosts or a percentage like \"10%%\"", str)
		}
		*s = v
		return nil
	}
	// The stored form, {"count":N} or {"percent":P}.
	type plain Size
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("must be a count of hosts or a percentage like \"10%%\"")
	}
	*s = Size(p)
	return nil
}

// Rollout says how an op goes over its hosts batch by batch.
type Rollout struct {
	// Canary hosts go first, in a batch of their own.
	Canary int `json:"canary,omitempty"`
	// Batch is the size of every later batch; zero: all the rest at once.
	Batch Size `json:"batch"`
	// MaxFail is how many hosts may fail, in all, before the rollout stops
	// ahead of its next batch; a percentage is of the rollout's hosts.
	// Zero tolerates no failure.
	MaxFail Size `json:"max_fail"`
	// MinHealthy: each host of a batch must stay alive (and healthy, with
	// a health_cmd) this long after the op, or it counts as failed.
	MinHealthy time.Duration `json:"min_healthy,omitempty"`
	// Pause waits this long between batches.
	Pause time.Duration `json:"pause,omitempty"`
	// ApproveAfterCanary holds the rollout after the canary batch until
	// it is approved.
	ApproveAfterCanary bool `json:"approve_after_canary,omitempty"`
}

// MaxRolloutWait bounds min_healthy and pause: a rollout that must wait
// longer between batches is held for approval instead.
const MaxRolloutWait = 24 * time.Hour

// Validate checks a rollout, naming the field (under prefix) and the rule.
func (r Rollout) Validate(prefix string) error {
	switch {
	case r.Canary < 0:
		return fmt.Errorf("%scanary %d: must be 0 or more", prefix, r.Canary)
	case r.Batch.Count < 0 || r.Batch.Percent < 0 || r.Batch.Percent > 100:
		return fmt.Errorf("%sbatch %s: must be a count of hosts or a percentage up to 100%%", prefix, r.Batch)
	case r.MaxFail.Count < 0 || r.MaxFail.Percent < 0 || r.MaxFail.Percent > 100:
		return fmt.Errorf("%smax_fail %s: must be a count of hosts or a percentage up to 100%%", prefix, r.MaxFail)
	case r.MinHealthy < 0 || r.MinHealthy > MaxRolloutWait:
		return fmt.Errorf("%smin_healthy %s: must be from 0 to %s", prefix, r.MinHealthy, MaxRolloutWait)
	case r.Pause < 0 || r.Pause > MaxRolloutWait:
		return fmt.Errorf("%spause %s: must be from 0 to %s", prefix, r.Pause, MaxRolloutWait)
	case r.ApproveAfterCanary && r.Canary == 0:
		return fmt.Errorf("%sapprove_after_canary: needs a canary of 1 host or more", prefix)
	}
	return nil
}

// MaxRolloutBatches bounds a rollout's batches: each adds a few dozen
// events to the rollout's history, which must stay far from the server's
// limit.
const MaxRolloutBatches = 500

// ValidateFor is Validate for a rollout over total hosts: its batches must
// not outnumber MaxRolloutBatches.
func (r Rollout) ValidateFor(prefix string, total int) error {
	if err := r.Validate(prefix); err != nil {
		return err
	}
	if n := len(Batches(total, r)); n > MaxRolloutBatches {
		return fmt.Errorf("%sbatch %s: %d hosts make %d batches; at most %d (give a larger batch or a percentage)", prefix, r.Batch, total, n, MaxRolloutBatches)
	}
	return nil
}

// Batches splits total hosts into batch sizes, in order: the canary (at
// most total), then batches of Batch (at least 1 host each), the last one
// what remains.
func Batches(total int, r Rollout) []int {
	var out []int
	left := total
	if c := min(r.Canary, left); c > 0 {
		out = append(out, c)
		left -= c
	}
	size := r.Batch.Of(total)
	if size <= 0 {
		size = left
	}
	for left > 0 {
		n := min(size, left)
		out = append(out, n)
		left -= n
	}
	return out
}

// OverBudget reports whether failed hosts (so far, of total) cross the
// rollout's max_fail.
func OverBudget(failed, total int, maxFail Size) bool {
	if maxFail.Percent > 0 {
		return float64(failed)*100 > maxFail.Percent*float64(total)
	}
	return failed > maxFail.Count
}

// After is what a rollout does once a batch is done.
type After struct {
	Stop            bool          // the failure budget is spent: no more batches
	Done            bool          // that was the last batch
	WaitForApproval bool          // hold until approved
	Pause           time.Duration // wait this long first
}

// AfterBatch decides what follows batch (0-based) of n batches, with
// failed hosts so far of total. Running out of budget wins over
// everything: a failed canary is never waiting for an approval.
func AfterBatch(r Rollout, batch, n, failed, total int) After {
	switch {
	case OverBudget(failed, total, r.MaxFail):
		return After{Stop: true}
	case batch >= n-1:
		return After{Done: true}
	}
	a := After{Pause: r.Pause}
	if batch == 0 && r.Canary > 0 && r.ApproveAfterCanary {
		a.WaitForApproval = true
	}
	return a
}

// HealthCheckEvery is the interval between health checks of a batch over
// minHealthy: at least 1s, at most 5s, about six checks for short windows.
func HealthCheckEvery(minHealthy time.Duration) time.Duration {
	return min(max(minHealthy/6, time.Second), 5*time.Second)
}
