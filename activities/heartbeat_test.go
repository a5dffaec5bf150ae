package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
)

// TestOutlastLostHeartbeats: the SDK's end of an attempt whose heartbeat a
// loaded server did not take in time leaves a batch running; a server that
// no longer knows the attempt, a cancel the workflow asked for, or the
// attempt's deadline ends it.
func TestOutlastLostHeartbeats(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		lost bool
	}{
		{"heartbeat not taken", serviceerror.NewDeadlineExceeded("context deadline exceeded"), true},
		{"server busy", serviceerror.NewResourceExhausted(0, "workflow is busy"), true},
		{"server unavailable", serviceerror.NewUnavailable("not enough hosts to serve the request"), true},
		{"server's own failure", serviceerror.NewInternal("persistence timeout"), true},
		{"server gave up", serviceerror.NewAborted("shard ownership lost"), true},
		{"server canceled", serviceerror.NewCanceled("canceled"), false},
		{"plain error", errors.New("heartbeat failed"), false},
		{"attempt no longer known", serviceerror.NewNotFound("invalid activityID or activity already timed out"), false},
		{"cancel asked for", temporal.NewCanceledError(), false},
		{"attempt's deadline", context.DeadlineExceeded, false},
	} {
		if got := presumedLost(tc.err); got != tc.lost {
			t.Errorf("%s: presumed lost %v, want %v", tc.name, got, tc.lost)
		}
	}

	parent, cancel := context.WithCancelCause(context.Background())
	ctx, release := outlast(parent, time.Now().Add(time.Hour))
	defer release()
	cancel(temporal.NewCanceledError())
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a cancel asked for did not end the batch")
	}

	ctx, release = outlast(context.Background(), time.Now().Add(10*time.Millisecond))
	defer release()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("past the deadline: %v", ctx.Err())
	}
}
