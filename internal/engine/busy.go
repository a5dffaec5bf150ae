package engine

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
)

// submitBudget is how long a task's starts keep being tried on a server
// too busy to answer them: a dev server checkpointing its database, or a
// cluster under a fleet op, can stall past one call's 10 s.
const submitBudget = 2 * time.Minute

// whileBusy runs start until it succeeds, fails for a reason a retry
// cannot change, or submitBudget (or ctx) ends. Only idempotent starts go
// through it: a workflow id already started by an earlier try counts as
// started.
func whileBusy(ctx context.Context, start func(ctx context.Context) error) error {
	return WhileBusy(ctx, submitBudget, start)
}

// WhileBusy runs call until it succeeds, fails for a reason a retry cannot
// change (Busy), or budget (or ctx) ends, waiting longer between tries.
// Only calls that may be made twice go through it.
func WhileBusy(ctx context.Context, budget time.Duration, call func(ctx context.Context) error) error {
	until := time.Now().Add(budget)
	wait := 500 * time.Millisecond
	for {
		err := call(ctx)
		if err == nil || !Busy(err) || ctx.Err() != nil || time.Now().Add(wait).After(until) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 8*time.Second)
	}
}

// Busy reports whether a call failed because the server did not answer in
// time or shed it, not because of what it asked.
func Busy(err error) bool {
	var un *serviceerror.Unavailable
	var re *serviceerror.ResourceExhausted
	return TimedOut(err) || errors.As(err, &un) || errors.As(err, &re)
}

// TimedOut reports whether a call failed by running out of time, on the
// client's side or the server's.
func TimedOut(err error) bool {
	var de *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &de)
}
