package policies

import (
	"testing"
	"time"
)

// TestRestartPolicy walks every branch of the decision: failed starts
// (retry with backoff, give up), a death after a good run, and a crash
// loop (deaths soon after starts that passed their check).
func TestRestartPolicy(t *testing.T) {
	p := RestartPolicy{Retries: 4, Interval: 10 * time.Second, MaxDelay: 25 * time.Second, StableAfter: 10 * time.Minute}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	cases := []struct {
		name      string
		policy    RestartPolicy
		st        RestartState
		action    RestartAction
		delay     time.Duration
		crashes   int
		crashLoop bool
	}{
		{name: "first death, never started by supervision: at once", policy: p, st: RestartState{}, action: RestartNow},
		{name: "after one failed start: the interval", policy: p, st: RestartState{Attempts: 1}, action: RestartNow, delay: 10 * time.Second},
		{name: "after two: doubled", policy: p, st: RestartState{Attempts: 2}, action: RestartNow, delay: 20 * time.Second},
		{name: "after three: capped", policy: p, st: RestartState{Attempts: 3}, action: RestartNow, delay: 25 * time.Second},
		{name: "retries spent: give up", policy: p, st: RestartState{Attempts: 4}, action: RestartGiveUp},
		{name: "past the retries: give up", policy: p, st: RestartState{Attempts: 9}, action: RestartGiveUp},
		{name: "zero retries: give up at once", policy: RestartPolicy{Retries: 0}, st: RestartState{}, action: RestartGiveUp},
		{name: "failed starts in a crash loop keep their crash count", policy: p, st: RestartState{Attempts: 1, Crashes: 3, UpSince: ago(time.Minute)},
			action: RestartNow, delay: 10 * time.Second, crashes: 3},
		{name: "death after a stable run: at once", policy: p, st: RestartState{UpSince: ago(10 * time.Minute)}, action: RestartNow},
		{name: "death after a stable run clears a crash loop", policy: p, st: RestartState{Crashes: 5, UpSince: ago(time.Hour)}, action: RestartNow},
		{name: "first quick death: still at once", policy: p, st: RestartState{UpSince: ago(30 * time.Second)}, action: RestartNow, crashes: 1},
		{name: "second quick death: the interval", policy: p, st: RestartState{Crashes: 1, UpSince: ago(30 * time.Second)},
			action: RestartNow, delay: 10 * time.Second, crashes: 2, crashLoop: true},
		{name: "third quick death: doubled", policy: p, st: RestartState{Crashes: 2, UpSince: ago(30 * time.Second)},
			action: RestartNow, delay: 20 * time.Second, crashes: 3, crashLoop: true},
		{name: "a long crash loop: capped, never given up", policy: p, st: RestartState{Crashes: 40, UpSince: ago(time.Second)},
			action: RestartNow, delay: 25 * time.Second, crashes: 41, crashLoop: true},
		{name: "just under the stable run: still a crash", policy: p, st: RestartState{Crashes: 1, UpSince: ago(10*time.Minute - time.Second)},
			action: RestartNow, delay: 10 * time.Second, crashes: 2, crashLoop: true},
		{name: "no StableAfter: no crash-loop backoff", policy: RestartPolicy{Retries: 4, Interval: 10 * time.Second}, st: RestartState{Crashes: 3, UpSince: ago(time.Second)},
			action: RestartNow},
	}
	for _, c := range cases {
		got := c.policy.Next(c.st, now, "k")
		if got.Action != c.action || got.Delay != c.delay || got.State.Crashes != c.crashes || got.CrashLoop != c.crashLoop {
			t.Errorf("%s: %+v, want action %d delay %s crashes %d crash loop %v", c.name, got, c.action, c.delay, c.crashes, c.crashLoop)
		}
		if got.State.Attempts != c.st.Attempts || !got.State.UpSince.Equal(c.st.UpSince) {
			t.Errorf("%s: the decision changed more than the crash count: %+v from %+v", c.name, got.State, c.st)
		}
	}
}

func TestRestartJitterIsBoundedAndDeterministic(t *testing.T) {
	p := NewRestartPolicy(10, 10*time.Second)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	seen := map[time.Duration]bool{}
	for _, key := range []string{"a", "b", "c", "d", "e", "f"} {
		for _, st := range []RestartState{{Attempts: 1}, {Crashes: 1, UpSince: now.Add(-time.Second)}} {
			d1 := p.Next(st, now, key).Delay
			d2 := p.Next(st, now, key).Delay
			if d1 != d2 {
				t.Fatalf("jitter for %q differs between calls: %s %s", key, d1, d2)
			}
			if d1 < 10*time.Second || d1 > 12500*time.Millisecond {
				t.Fatalf("delay %s outside [10s, 12.5s]", d1)
			}
			seen[d1] = true
		}
	}
	if len(seen) < 3 {
		t.Fatalf("jitter should spread processes: %v", seen)
	}
	if d := p.Next(RestartState{Attempts: 9}, now, "a").Delay; d > MaxRestartDelay+MaxRestartDelay/4 {
		t.Fatalf("delay %s over the cap plus jitter", d)
	}
	if d := p.Next(RestartState{Crashes: 99, UpSince: now}, now, "a").Delay; d > MaxRestartDelay+MaxRestartDelay/4 {
		t.Fatalf("crash-loop delay %s over the cap plus jitter", d)
	}
}

func TestRestartState(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	st := RestartState{Crashes: 2}.Started().Started()
	if st.Attempts != 2 {
		t.Fatalf("two starts: %+v", st)
	}
	up := st.StayedUp(now)
	if up.Attempts != 0 || up.Crashes != 2 || !up.UpSince.Equal(now) {
		t.Fatalf("a start that stayed up clears the failed starts, keeps the crash loop and notes when: %+v", up)
	}
}
