package policies

import (
	"testing"
	"time"
)

func TestOpRetryAfter(t *testing.T) {
	for _, c := range []struct {
		n     int
		wait  time.Duration
		again bool
	}{
		{0, 0, false}, // no attempt has failed: nothing to retry
		{1, time.Second, true},
		{2, 2 * time.Second, true},
		{3, 0, false}, // the last attempt
		{4, 0, false},
	} {
		wait, again := OpRetryAfter(c.n)
		if wait != c.wait || again != c.again {
			t.Errorf("OpRetryAfter(%d) = %v, %v; want %v, %v", c.n, wait, again, c.wait, c.again)
		}
	}
}

// TestOpRetryAfterMatchesTheServersSchedule: the server's retry of
// supervision's ops (first interval, factor, attempts) waits as a task's
// op retried by its workflow does.
func TestOpRetryAfterMatchesTheServersSchedule(t *testing.T) {
	wait := OpRetryFirst
	for n := 1; n < OpAttempts; n++ {
		got, again := OpRetryAfter(n)
		if !again || got != wait {
			t.Fatalf("after attempt %d: %v, %v; the server waits %v", n, got, again, wait)
		}
		wait *= OpRetryFactor
	}
	if _, again := OpRetryAfter(OpAttempts); again {
		t.Fatalf("attempt %d retried; the server stops after %d", OpAttempts, OpAttempts)
	}
}
