package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
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
		{"server's unknown failure", errors.New("database is locked"), true},
		{"attempt no longer known", serviceerror.NewNotFound("invalid activityID or activity already timed out"), false},
		{"cancel asked for", temporal.NewCanceledError(), false},
		{"attempt's deadline", context.DeadlineExceeded, true},
		{"worker shut down", context.Canceled, false},
		{"namespace gone", serviceerror.NewNamespaceNotFound("default"), false},
		{"paused", activity.ErrActivityPaused, false},
		{"reset", activity.ErrActivityReset, false},
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
	var canceled *temporal.CanceledError
	if !errors.As(context.Cause(ctx), &canceled) {
		t.Fatalf("the batch's cause is %v, want the cancel asked for", context.Cause(ctx))
	}

	ctx, release = outlast(context.Background(), time.Now().Add(10*time.Millisecond))
	defer release()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("past the deadline: %v", ctx.Err())
	}
}
