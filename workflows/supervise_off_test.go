package workflows

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/proc"
)

// TestSupervisionOffStartsNoWatch: a start manages its process, but a host
// told by its worker that supervision is off never starts a watch of it.
func TestSupervisionOffStartsNoWatch(t *testing.T) {
	ht := newHostTest(t, func(context.Context, activities.HostOpInput) (activities.HostOpOutput, error) {
		return activities.HostOpOutput{Result: proc.HostResult{Code: proc.CodeSuccess, Message: "success"}, Started: true, Alive: true, Pid: 42}, nil
	})
	var watches atomic.Int64
	ht.env.RegisterActivityWithOptions(func(context.Context, activities.WatchInput) (activities.WatchOutput, error) {
		watches.Add(1)
		return activities.WatchOutput{}, errors.New("no watch expected")
	}, activity.RegisterOptions{Name: "Watch"})
	req := startRequest("start#0", 0, "a")
	req.Supervision = &Supervision{Interval: time.Second, Off: true}
	ht.send(time.Second, req)
	ht.run()
	if r := ht.replies[0]; r.Code != proc.CodeSuccess {
		t.Fatalf("start: %+v", r)
	}
	if n := watches.Load(); n != 0 {
		t.Fatalf("%d watches started with supervision off", n)
	}
}
