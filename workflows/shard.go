package workflows

import (
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
)

// ShardState is a shard workflow's state: only who is watched at which
// generation, never what, so it stays a few tens of KB however many
// processes its hosts have (about 45 bytes a host).
type ShardState struct {
	ID string `json:"id"`
	// WatchQueue is where its ShardWatch runs.
	WatchQueue string                   `json:"watch_queue"`
	Members    []activities.ShardMember `json:"members,omitempty"`
	// Epoch counts the ShardWatches started, across runs.
	Epoch int `json:"epoch,omitempty"`
}

// shardHistoryBudget is the history events a shard run may spend before
// it continues as new: far below the server's limits, so a shard that
// churns (hosts failing over and over) never comes near them.
var shardHistoryBudget = 2000

// WatchShard keeps a shard's membership and runs one ShardWatch over its
// members. A quiet shard waits on that activity and adds nothing to its
// history; a membership change starts the watch again, at most once per
// policies.ShardRestartDebounce.
func WatchShard(ctx workflow.Context, st ShardState) error {
	s := &shard{ShardState: st, arms: workflow.GetSignalChannel(ctx, ShardArmSignal),
		armBatches: workflow.GetSignalChannel(ctx, ShardArmsSignal), dirty: true}
	if err := workflow.SetQueryHandler(ctx, ShardMembersQuery, func() (ShardState, error) {
		return s.ShardState, nil
	}); err != nil {
		return err
	}
	for {
		s.drain()
		info := workflow.GetInfo(ctx)
		if s.spent >= shardHistoryBudget || info.GetCurrentHistoryLength() >= shardHistoryBudget || info.GetContinueAsNewSuggested() {
			if s.stop != nil {
				s.stop()
			}
			s.drain()
			return workflow.NewContinueAsNewError(ctx, WatchShardWorkflowName, s.ShardState)
		}
		now := workflow.Now(ctx)
		if s.dirty && !now.Before(s.pauseTill) && !now.Before(s.startedAt.Add(policies.ShardRestartDebounce)) {
			s.restart(ctx, now)
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(s.arms, func(c workflow.ReceiveChannel, _ bool) {
			var a ShardArm
			c.Receive(ctx, &a)
			s.apply(a)
		})
		sel.AddReceive(s.armBatches, func(c workflow.ReceiveChannel, _ bool) {
			var arms []ShardArm
			c.Receive(ctx, &arms)
			for _, a := range arms {
				s.apply(a)
			}
		})
		if s.running != nil {
			f := s.running
			sel.AddFuture(f, func(workflow.Future) { s.ended(ctx, f) })
		}
		var stopTimer workflow.CancelFunc
		if s.dirty {
			at := s.startedAt.Add(policies.ShardRestartDebounce)
			if s.pauseTill.After(at) {
				at = s.pauseTill
			}
			if at.After(now) {
				tctx, cancel := workflow.WithCancel(ctx)
				stopTimer = cancel
				sel.AddFuture(workflow.NewTimer(tctx, at.Sub(now)), func(workflow.Future) {})
				s.spent += 2
			}
		}
		sel.Select(ctx)
		if stopTimer != nil {
			stopTimer()
		}
	}
}

type shard struct {
	ShardState
	arms, armBatches workflow.ReceiveChannel
	// dirty: the running watch is not of the current membership.
	dirty     bool
	running   workflow.Future
	stop      workflow.CancelFunc
	startedAt time.Time
	// pauseTill: a watch failed outright; the next waits till then.
	pauseTill time.Time
	spent     int // history events of this run, roughly
}

func (s *shard) drain() {
	for {
		var a ShardArm
		if !s.arms.ReceiveAsync(&a) {
			break
		}
		s.apply(a)
	}
	for {
		var arms []ShardArm
		if !s.armBatches.ReceiveAsync(&arms) {
			return
		}
		for _, a := range arms {
			s.apply(a)
		}
	}
}

// apply takes one arm into the membership; an arm older than the one the
// shard has is dropped, and so is a disarm of an older generation.
func (s *shard) apply(a ShardArm) {
	s.spent += 4 // the signal, and the workflow task it may cause
	i := sort.Search(len(s.Members), func(i int) bool { return s.Members[i].Host >= a.Host })
	here := i < len(s.Members) && s.Members[i].Host == a.Host
	switch {
	case a.Gen == 0 && here && a.Ends > 0 && s.Members[i].Gen > a.Ends:
		return
	case a.Gen == 0 && here:
		s.Members = append(s.Members[:i], s.Members[i+1:]...)
	case a.Gen == 0:
		return
	case here && s.Members[i].Gen >= a.Gen:
		return
	case here:
		s.Members[i].Gen = a.Gen
	default:
		s.Members = append(s.Members, activities.ShardMember{})
		copy(s.Members[i+1:], s.Members[i:])
		s.Members[i] = activities.ShardMember{Host: a.Host, Gen: a.Gen}
	}
	s.dirty = true
}

// restart cancels the running watch and starts one of the current
// membership, if there is anyone to watch.
func (s *shard) restart(ctx workflow.Context, now time.Time) {
	if s.stop != nil {
		s.stop()
	}
	s.running, s.stop, s.dirty = nil, nil, false
	if len(s.Members) == 0 {
		return
	}
	s.Epoch++
	actx, cancel := workflow.WithCancel(ctx)
	actx = workflow.WithActivityOptions(actx, workflow.ActivityOptions{
		TaskQueue:           s.WatchQueue,
		StartToCloseTimeout: policies.WatchRenew + 10*time.Minute,
		// One heartbeat per shard every 0.8 of it is what quiet
		// supervision costs the server; a lost worker's shard is taken
		// up by another within it.
		HeartbeatTimeout: policies.ShardHeartbeatTimeout,
		// A shard no worker takes up fails, and its hosts record that
		// their supervision is paused, rather than going unwatched.
		ScheduleToStartTimeout: policies.WatchScheduleToStart,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second},
	})
	s.running = workflow.ExecuteActivity(actx, ShardWatchActivity, activities.ShardWatchInput{Shard: s.ID, Epoch: s.Epoch, Members: s.Members})
	s.stop, s.startedAt = cancel, now
	s.spent += 8
}

// ended handles the watch's end: a renewal starts the next; a failure
// tells every member its supervision is paused, and the next waits.
func (s *shard) ended(ctx workflow.Context, f workflow.Future) {
	s.running, s.stop, s.dirty = nil, nil, true
	err := f.Get(ctx, nil)
	if err == nil || temporal.IsCanceledError(err) {
		return
	}
	s.pauseTill = workflow.Now(ctx).Add(policies.WatchFailureBackoff)
	why := oneLine(fmt.Sprintf("the watch of %s failed: %v", s.ID, err))
	var sent []workflow.Future
	for _, m := range s.Members {
		sent = append(sent, workflow.SignalExternalWorkflow(ctx, m.Host, "", WatchEventsSignal, activities.ShardEvents{Gen: m.Gen, Failed: why}))
	}
	for _, f := range sent {
		_ = f.Get(ctx, nil) // a host that is gone needs no telling
	}
	s.spent += 2 * len(sent)
}
