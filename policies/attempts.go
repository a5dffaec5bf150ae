package policies

import "time"

// A host op is tried up to OpAttempts times, the next attempt waiting
// OpRetryAfter. A task's op is retried by its host workflow, not by the
// server: a cancel that comes between two attempts then knows that one ran
// on the host, and answers with the process's state after, not "not run".
// Supervision's own ops, which nothing cancels, are retried by the server
// on the same schedule.

// OpAttempts is how many times a host op is tried.
const OpAttempts = 3

// OpRetryFirst and OpRetryFactor give the server's retry policy of the op
// the same schedule as OpRetryAfter.
const (
	OpRetryFirst  = time.Second
	OpRetryFactor = 2
)

// OpRetryAfter is the wait after failed attempt n (counted from 1) and
// whether another attempt follows.
func OpRetryAfter(n int) (time.Duration, bool) {
	if n < 1 || n >= OpAttempts {
		return 0, false
	}
	return OpRetryFirst << (n - 1), true
}
