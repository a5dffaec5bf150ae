package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
)

// heartbeatEvery is well under policies.HeartbeatTimeout.
const heartbeatEvery = 2 * time.Second

// keepAlive heartbeats while a host command runs, so a long control command
// is not mistaken for a lost worker. The returned stop ends it.
func keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	return Every(ctx, heartbeatEvery, func() { activity.RecordHeartbeat(ctx) })
}

// Every calls f every period, on a goroutine of its own, until the
// returned stop or the end of ctx: the loop of an activity's heartbeats
// and of what else it reports as it goes.
func Every(ctx context.Context, period time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() { close(done) }
}

// KeepAlive is keepAlive for activities of other packages that wait on
// something other than a host command.
func KeepAlive(ctx context.Context) (stop func()) { return keepAlive(ctx) }

// StopOnWorkerStop derives a context that ends when the worker running the
// activity begins to stop; stopping reports whether that happened. Outside
// an activity (tests calling it directly) nothing stops it. release ends
// the derived context. An activity that only waits on the engine uses it
// to hand its wait back to another worker.
func StopOnWorkerStop(ctx context.Context) (_ context.Context, stopping func() bool, release func()) {
	if !activity.IsActivity(ctx) {
		return ctx, func() bool { return false }, func() {}
	}
	stop := activity.GetWorkerStopChannel(ctx)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}, cancel
}

// OutlastLostHeartbeats derives a context that the SDK's end of an attempt
// whose heartbeat a loaded server did not take in time does not end: a
// batch that only reads hosts or waits on them goes on, and its answers
// reach its task by signal whatever the server made of the attempt. A
// cancel the task asked for, a server that no longer knows the attempt,
// the attempt's deadline and the returned release still end it; the
// context's cause then says which.
func OutlastLostHeartbeats(ctx context.Context) (context.Context, func()) {
	if !activity.IsActivity(ctx) {
		return context.WithCancel(ctx)
	}
	return outlast(ctx, activity.GetInfo(ctx).Deadline)
}

// outlast is OutlastLostHeartbeats with the attempt's deadline.
func outlast(ctx context.Context, deadline time.Time) (context.Context, func()) {
	base, end := context.WithCancelCause(context.WithoutCancel(ctx))
	out, cancel := context.WithDeadline(base, deadline)
	stop := context.AfterFunc(ctx, func() {
		if cause := context.Cause(ctx); !presumedLost(cause) {
			end(cause)
		}
	})
	return out, func() { stop(); cancel(); end(nil) }
}

// Ended is ctx's error, naming its cause when that says more: why a batch
// was given up, for its task's history.
func Ended(ctx context.Context) error {
	err := ctx.Err()
	if c := context.Cause(ctx); err != nil && c != nil && !errors.Is(c, err) {
		return fmt.Errorf("%w: %v", err, c)
	}
	return err
}

// presumedLost reports whether an attempt's context ended by cause only
// because the SDK presumed the attempt lost: a heartbeat that a loaded
// server did not take before the SDK's retries gave up. Those retries take
// every code but the few below as passing, Unknown too, which reaches the
// cause as a plain error. A cancel the task asked for, a server that no
// longer knows the attempt (it timed out, or its task ended) and a worker
// shutting down end it. The attempt's deadline is the derived context's
// own.
func presumedLost(cause error) bool {
	var (
		canceled *temporal.CanceledError
		notFound *serviceerror.NotFound
		nsGone   *serviceerror.NamespaceNotFound
		nsAway   *serviceerror.NamespaceNotActive
		se       serviceerror.ServiceError
	)
	switch {
	case cause == nil,
		errors.As(cause, &canceled), errors.As(cause, &notFound),
		errors.As(cause, &nsGone), errors.As(cause, &nsAway),
		errors.Is(cause, activity.ErrActivityPaused), errors.Is(cause, activity.ErrActivityReset),
		errors.Is(cause, context.Canceled):
		return false
	case errors.As(cause, &se):
		return se.Status().Code() != codes.Canceled
	}
	return true
}
