package policies

import (
	"testing"
	"time"
)

func TestHeartbeatEvery(t *testing.T) {
	for _, c := range []struct {
		timeout, want time.Duration
	}{
		{0, 2 * time.Second},                        // no heartbeat timeout (a local activity)
		{HeartbeatTimeout, 2500 * time.Millisecond}, // an op
		{StatusHeartbeatTimeout, 15 * time.Second},  // a status batch
		{DeliverHeartbeatTimeout, 15 * time.Second}, // a delivery batch
		{4 * time.Second, 2 * time.Second},          // never more often than 2 s
	} {
		if got := HeartbeatEvery(c.timeout); got != c.want {
			t.Errorf("HeartbeatEvery(%v) = %v, want %v", c.timeout, got, c.want)
		}
		// The server hears from the activity at least this often, and a
		// heartbeat may be late by the rest of the timeout: half of it or
		// more for every activity of the ops worker.
		if c.timeout > 0 {
			heard := max(HeartbeatEvery(c.timeout), HeartbeatThrottleMax)
			if slack := c.timeout - heard; slack < c.timeout/2 && c.timeout >= HeartbeatTimeout {
				t.Errorf("timeout %v: heard every %v leaves %v for a late heartbeat, under half", c.timeout, heard, slack)
			}
		}
	}
}
