package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
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
