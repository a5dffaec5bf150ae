package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
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
// the attempt's deadline and the returned release still end it.
func OutlastLostHeartbeats(ctx context.Context) (context.Context, func()) {
	if !activity.IsActivity(ctx) {
		return context.WithCancel(ctx)
	}
	return outlast(ctx, activity.GetInfo(ctx).Deadline)
}

// outlast is OutlastLostHeartbeats with the attempt's deadline.
func outlast(ctx context.Context, deadline time.Time) (context.Context, func()) {
	out, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	stop := context.AfterFunc(ctx, func() {
		if !presumedLost(context.Cause(ctx)) {
			cancel()
		}
	})
	return out, func() { stop(); cancel() }
}

// presumedLost reports whether an attempt's context ended by cause only
// because the SDK presumed the attempt lost: a heartbeat a loaded server
// did not take in time, which the SDK tried again until its throttle
// interval ended and then took for the attempt timed out (any code its
// retries take as passing, or a deadline). A cancel the task asked for,
// the attempt's deadline, and a server that no longer knows the attempt
// (it timed out, or its task ended: terminated, say) end it.
func presumedLost(cause error) bool {
	if errors.Is(cause, context.DeadlineExceeded) {
		return false
	}
	var se serviceerror.ServiceError
	if !errors.As(cause, &se) {
		return false
	}
	switch se.Status().Code() {
	case codes.DeadlineExceeded, codes.ResourceExhausted, codes.Unavailable, codes.Aborted, codes.Internal:
		return true
	}
	return false
}
