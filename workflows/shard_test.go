package workflows

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/proc"
)

// shardRig runs one Host workflow whose shard is faked: arms are
// recorded, and the test signals the events a shard watch would.
type shardRig struct {
	t    *testing.T
	env  *testsuite.TestWorkflowEnvironment
	mu   sync.Mutex
	arms []ArmInput
	ops  []proc.OpType
	// settled: the workflow returned; later calls are not recorded, so
	// the test reads arms and ops without the lock.
	settled bool
}

func newShardRig(t *testing.T) *shardRig {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	r := &shardRig{t: t, env: s.NewTestWorkflowEnvironment()}
	r.env.RegisterWorkflowWithOptions(Host, workflow.RegisterOptions{Name: HostWorkflowName})
	r.env.RegisterActivityWithOptions(func(_ context.Context, in ArmInput) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.settled {
			r.arms = append(r.arms, in)
		}
		return nil
	}, activity.RegisterOptions{Name: "ArmWatch"})
	r.env.RegisterActivityWithOptions(func(_ context.Context, in activities.HostOpInput) (activities.HostOpOutput, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.settled {
			r.ops = append(r.ops, in.Op)
		}
		return success(in), nil
	}, activity.RegisterOptions{Name: "HostOp"})
	r.env.RegisterActivityWithOptions(func(context.Context, activities.WatchInput) (activities.WatchOutput, error) {
		r.t.Error("a host watched by its shard ran a watch of its own")
		return activities.WatchOutput{}, nil
	}, activity.RegisterOptions{Name: "Watch"})
	return r
}

// at signals the host at a time on the workflow's clock.
func (r *shardRig) at(d time.Duration, signal string, arg any) {
	r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(signal, arg) }, d)
}

// run runs the host with entries until theEnd, and returns the state it
// carries on with.
func (r *shardRig) run(entries ...Entry) HostState {
	r.t.Helper()
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(RenewSignal, nil)
		r.env.SignalWorkflow(OpSignal, HostRequest{RequestID: "end", Op: proc.OpSpecUnregister, Process: proc.ProcessID{Namespace: "-", Name: "-"}})
	}, theEnd)
	r.execute(HostState{Host: proc.HostID{IP: "10.0.0.1"}, Entries: entries,
		Supervision: Supervision{WatchShards: 4, WatchQueue: "watches"}})
	var can *workflow.ContinueAsNewError
	if !r.env.IsWorkflowCompleted() || !errors.As(r.env.GetWorkflowError(), &can) {
		r.t.Fatalf("the host did not carry on as a new run: %v", r.env.GetWorkflowError())
	}
	var next HostState
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		r.t.Fatal(err)
	}
	return next
}

func (r *shardRig) execute(state HostState) {
	r.env.ExecuteWorkflow(HostWorkflowName, state)
	r.mu.Lock()
	r.settled = true
	r.mu.Unlock()
}

func (r *shardRig) gens() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, a := range r.arms {
		out = append(out, a.Arm.Gen)
	}
	return out
}

func dead(gen int) activities.ShardEvents {
	return activities.ShardEvents{Gen: gen, Events: []activities.WatchEvent{{Index: 0, Kind: activities.WatchDead, Detail: "process(svc) is not running"}}}
}

// TestShardArmEventsDecideRearm: the host arms its shard at generation 1,
// restarts the process its shard saw dead, and arms generation 2; its
// query answers what the shard is to poll at each.
func TestShardArmEventsDecideRearm(t *testing.T) {
	r := newShardRig(t)
	var before, after activities.HostWatch
	r.env.RegisterDelayedCallback(func() { before = r.query() }, time.Minute)
	r.at(2*time.Minute, WatchEventsSignal, dead(1))
	r.env.RegisterDelayedCallback(func() { after = r.query() }, 3*time.Minute)
	st := r.run(managed(nil))
	if g := r.gens(); !same(g, []int{1, 2}) {
		t.Fatalf("arms %v, want generations 1 then 2", g)
	}
	if !same(r.ops, []proc.OpType{proc.OpStart}) {
		t.Fatalf("ops %v, want one start", r.ops)
	}
	wantEvents(t, st, EventRestartSuccess)
	a := r.arms[0]
	if a.Shard != ShardWorkflowID("watches", "host:0:10.0.0.1", 4) || a.WatchQueue != "watches" || a.Arm.Host != "host:0:10.0.0.1" {
		t.Fatalf("arm %+v", a)
	}
	if before.Gen != 1 || before.Input == nil || len(before.Input.Entries) != 1 || after.Gen != 2 || after.Input == nil {
		t.Fatalf("watch-input answered %+v, then %+v", before, after)
	}
	// Each arm carries what the query answers at its generation, for a
	// watch on the arm's worker to take without the query.
	for i, w := range []activities.HostWatch{before, after} {
		if got := r.arms[i].Watch; got == nil || !sameWatchInput(*got, *w.Input) {
			t.Fatalf("arm of generation %d carries %+v, want %+v", w.Gen, got, w.Input)
		}
	}
	if st.WatchGen != 2 || st.WatchShard != a.Shard {
		t.Fatalf("carried on armed at %d on %q", st.WatchGen, st.WatchShard)
	}
}

func (r *shardRig) query() activities.HostWatch {
	v, err := r.env.QueryWorkflow(WatchInputQuery)
	if err != nil {
		r.t.Fatal(err)
	}
	var w activities.HostWatch
	if err := v.Get(&w); err != nil {
		r.t.Fatal(err)
	}
	return w
}

// TestShardStaleGenerationIgnored: events of a generation the host is not
// armed at, before or after, and a repeat of one already decided on,
// change nothing.
func TestShardStaleGenerationIgnored(t *testing.T) {
	r := newShardRig(t)
	r.at(time.Minute, WatchEventsSignal, dead(0))
	r.at(2*time.Minute, WatchEventsSignal, dead(7))
	r.at(3*time.Minute, WatchEventsSignal, dead(1))
	r.at(3*time.Minute+time.Second, WatchEventsSignal, dead(1))
	st := r.run(managed(nil))
	if !same(r.ops, []proc.OpType{proc.OpStart}) {
		t.Fatalf("ops %v, want the one start generation 1 called for", r.ops)
	}
	if g := r.gens(); !same(g, []int{1, 2}) {
		t.Fatalf("arms %v: stale events must not re-arm", g)
	}
	wantEvents(t, st, EventRestartSuccess)
}

// TestShardFailureIsRecordedAndRearmed: a shard that cannot watch says so;
// the host records that its supervision is paused and arms again after
// the backoff.
func TestShardFailureIsRecordedAndRearmed(t *testing.T) {
	r := newShardRig(t)
	r.at(time.Minute, WatchEventsSignal, activities.ShardEvents{Gen: 1, Failed: "no worker took the shard watch up"})
	st := r.run(managed(nil))
	wantEvents(t, st, EventWatchFailed)
	if g := r.gens(); !same(g, []int{1, 2}) || len(r.ops) != 0 {
		t.Fatalf("arms %v, ops %v", g, r.ops)
	}
}

// TestShardDisarmedWhenNothingIsWatched: a host whose last managed
// process is stopped leaves its shard.
func TestShardDisarmedWhenNothingIsWatched(t *testing.T) {
	r := newShardRig(t)
	r.at(time.Minute, OpSignal, HostRequest{RequestID: "stop", Op: proc.OpStop, Process: managed(nil).Process})
	st := r.run(managed(nil))
	if g := r.gens(); !same(g, []int{1, 0}) || st.WatchShard != "" {
		t.Fatalf("arms %v, shard %q: want armed, then disarmed", g, st.WatchShard)
	}
	if d := r.arms[1]; d.Watch != nil || d.Ends != 1 {
		t.Fatalf("the disarm carries watch %+v, ends %d: want none, ending generation 1", d.Watch, d.Ends)
	}
}

// TestShardOldVersionKeepsItsOwnWatch: a host whose run took the default
// version (it began before shards) runs a watch of its own, shards or not.
func TestShardOldVersionKeepsItsOwnWatch(t *testing.T) {
	r := newRig(t)
	r.watches = []watchAnswer{dies()}
	r.env.OnGetVersion(VersionWatchShard, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	// ArmWatch is not even registered: an arm would fail, and say so.
	r.env.RegisterDelayedCallback(r.end, theEnd)
	r.execute(HostState{Host: proc.HostID{IP: "10.0.0.1"}, Entries: []Entry{managed(nil)},
		Supervision: Supervision{WatchShards: 4}})
	r.wantOps(proc.OpStart)
	var can *workflow.ContinueAsNewError
	var next HostState
	if !errors.As(r.env.GetWorkflowError(), &can) || converter.GetDefaultDataConverter().FromPayloads(can.Input, &next) != nil {
		t.Fatalf("the host did not carry on: %v", r.env.GetWorkflowError())
	}
	wantEvents(t, next, EventRestartSuccess)
	if len(r.watched) != 2 || next.WatchGen != 0 || next.WatchShard != "" {
		t.Fatalf("%d watches of its own, want 2; armed %d on %q", len(r.watched), next.WatchGen, next.WatchShard)
	}
}

// shardRun runs a WatchShard with its ShardWatch faked: each runs until
// cancelled, and its starts are recorded by the workflow's clock.
type shardRun struct {
	env    *testsuite.TestWorkflowEnvironment
	mu     sync.Mutex
	starts []time.Duration
	inputs []activities.ShardWatchInput
}

func newShardRun(t *testing.T) *shardRun {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	r := &shardRun{env: s.NewTestWorkflowEnvironment()}
	r.env.RegisterWorkflowWithOptions(WatchShard, workflow.RegisterOptions{Name: WatchShardWorkflowName})
	begun := r.env.Now()
	r.env.RegisterActivityWithOptions(func(context.Context, activities.ShardWatchInput) error { return nil },
		activity.RegisterOptions{Name: "ShardWatch"})
	r.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		var in activities.ShardWatchInput
		if info.ActivityType.Name != "ShardWatch" || args.Get(&in) != nil {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.starts = append(r.starts, r.env.Now().Sub(begun))
		r.inputs = append(r.inputs, in)
	})
	// A quiet watch runs until it is cancelled.
	r.env.OnActivity("ShardWatch", mock.Anything, mock.Anything).After(24 * time.Hour).Return(nil)
	return r
}

func (r *shardRun) arm(at time.Duration, host string, gen int) {
	r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(ShardArmSignal, ShardArm{Host: host, Gen: gen}) }, at)
}

// run runs the shard until it continues as new, and returns what it
// carries on with.
// armEach arms hosts 10.0.0.0 to 10.0.0.n-1 at generation 1, a second
// apart from the first second.
func (r *shardRun) armEach(n int) {
	for i := range n {
		r.arm(time.Duration(1+i)*time.Second, fmt.Sprintf("host:0:10.0.0.%d", i), 1)
	}
}

// spend re-arms host 10.0.0.0 n times from two hours in, a second apart,
// from generation 10: enough to spend a run's budget.
func (r *shardRun) spend(n int) {
	for g := range n {
		r.arm(2*time.Hour+time.Duration(g)*time.Second, "host:0:10.0.0.0", 10+g)
	}
}

func (r *shardRun) run(t *testing.T) ShardState {
	t.Helper()
	r.env.ExecuteWorkflow(WatchShardWorkflowName, ShardState{ID: "watch-shard:watches:0", WatchQueue: "watches"})
	var can *workflow.ContinueAsNewError
	if !r.env.IsWorkflowCompleted() || !errors.As(r.env.GetWorkflowError(), &can) {
		t.Fatalf("the shard did not carry on as a new run: %v", r.env.GetWorkflowError())
	}
	var next ShardState
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	return next
}

// withBudget sets the shard's history budget for one test.
func withBudget(t *testing.T, n int) {
	old := shardHistoryBudget
	shardHistoryBudget = n
	t.Cleanup(func() { shardHistoryBudget = old })
}

// TestShardMembershipDebounced: twenty hosts arming within two seconds
// start the shard's watch twice (the first arm at once, the rest together
// after the debounce), not twenty times.
func TestShardMembershipDebounced(t *testing.T) {
	withBudget(t, 400)
	r := newShardRun(t)
	for i := range 20 {
		r.arm(time.Second+time.Duration(i)*100*time.Millisecond, fmt.Sprintf("host:0:10.0.0.%d", i), 1)
	}
	// Then one host re-arms over and over until the run is spent.
	for g := range 100 {
		r.arm(time.Hour+time.Duration(g)*time.Millisecond, "host:0:10.0.0.0", 2+g)
	}
	r.run(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.starts) < 2 || r.starts[0] > 2*time.Second || r.starts[1] < r.starts[0]+5*time.Second || len(r.inputs[1].Members) != 20 {
		t.Fatalf("watch starts at %v; want the first at once, the second after the debounce with all 20 members", r.starts)
	}
	if len(r.starts) > 3 {
		t.Fatalf("%d watch starts for two bursts of arms: %v", len(r.starts), r.starts)
	}
	for i, in := range r.inputs[1:] {
		if in.Epoch != r.inputs[i].Epoch+1 {
			t.Fatalf("epochs %d then %d", r.inputs[i].Epoch, in.Epoch)
		}
	}
}

// TestShardContinuesAsNew: a shard past its history budget carries on as
// a new run with its members at their latest generations, in order, and
// its epoch; a disarmed host is gone.
func TestShardContinuesAsNew(t *testing.T) {
	withBudget(t, 200)
	r := newShardRun(t)
	r.armEach(3)
	r.arm(time.Hour, "host:0:10.0.0.2", 9)
	r.arm(time.Hour+time.Second, "host:0:10.0.0.1", 0)
	r.arm(time.Hour+2*time.Second, "host:0:10.0.0.2", 3) // older than the shard has
	r.spend(200)
	next := r.run(t)
	m := next.Members
	if len(m) != 2 || m[0].Host != "host:0:10.0.0.0" || m[0].Gen < 10 || m[1] != (activities.ShardMember{Host: "host:0:10.0.0.2", Gen: 9}) {
		t.Fatalf("carried on with members %+v", m)
	}
	if next.Epoch < 3 || next.ID != "watch-shard:watches:0" || next.WatchQueue != "watches" {
		t.Fatalf("carried on with %+v", next)
	}
}

// TestShardKeepsANewerArmThanALateDisarm: a disarm sent without waiting
// may reach the shard after the host armed again; it removes the host only
// as of the generation it ends. A disarm without one (older workers')
// removes the host whatever its generation.
func TestShardKeepsANewerArmThanALateDisarm(t *testing.T) {
	withBudget(t, 200)
	r := newShardRun(t)
	r.armEach(4)
	r.arm(time.Hour, "host:0:10.0.0.1", 3)
	r.arm(time.Hour, "host:0:10.0.0.3", 3)
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(ShardArmsSignal, []ShardArm{
			{Host: "host:0:10.0.0.1", Ends: 2}, // late: the host armed 3 since
			{Host: "host:0:10.0.0.2", Ends: 1},
			{Host: "host:0:10.0.0.3"},
		})
	}, time.Hour+time.Second)
	r.spend(200)
	m := r.run(t).Members
	if len(m) != 2 || m[0].Host != "host:0:10.0.0.0" || m[1] != (activities.ShardMember{Host: "host:0:10.0.0.1", Gen: 3}) {
		t.Fatalf("members %+v, want 10.0.0.0 and 10.0.0.1 at generation 3", m)
	}
}

// TestShardNewRunArmsTheNextGeneration: a run carried on from another
// arms its shard at the next generation, and never disarms it first: the
// shard is named from the host, not the execution (a history replayed
// under another id decides the same).
func TestShardNewRunArmsTheNextGeneration(t *testing.T) {
	r := newShardRig(t)
	r.env.RegisterDelayedCallback(func() {
		r.env.SignalWorkflow(RenewSignal, nil)
		r.env.SignalWorkflow(OpSignal, HostRequest{RequestID: "end", Op: proc.OpSpecUnregister, Process: proc.ProcessID{Namespace: "-", Name: "-"}})
	}, time.Hour)
	shard := ShardWorkflowID("watches", HostWorkflowID(proc.HostID{IP: "10.0.0.1"}), 1000)
	r.execute(HostState{Host: proc.HostID{IP: "10.0.0.1"}, Entries: []Entry{managed(nil)},
		Supervision: Supervision{WatchShards: 1000, WatchQueue: "watches"}, WatchGen: 3, WatchShard: shard})
	if g := r.gens(); !same(g, []int{4}) || r.arms[0].Shard != shard {
		t.Fatalf("arms %+v, want generation 4 on %s", r.arms, shard)
	}
}

// TestShardTakesArmsInBatches: a worker's arms of one shard, sent in one
// signal, join the shard as single arms do, and start one watch.
func TestShardTakesArmsInBatches(t *testing.T) {
	withBudget(t, 150)
	r := newShardRun(t)
	var arms []ShardArm
	for i := range 20 {
		arms = append(arms, ShardArm{Host: fmt.Sprintf("host:0:10.0.0.%d", i), Gen: 1})
	}
	r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(ShardArmsSignal, arms) }, time.Second)
	// Then single arms spend the run.
	for g := range 30 {
		r.arm(time.Hour+time.Duration(g)*time.Millisecond, "host:0:10.0.0.0", 2+g)
	}
	next := r.run(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.inputs) == 0 || len(r.inputs[0].Members) != 20 || len(next.Members) != 20 {
		t.Fatalf("watches %+v, next run's members %d; want the first watch and the next run with 20 each", r.inputs, len(next.Members))
	}
}

// update sends the host watch events by update at a time on the workflow's
// clock, and records whether the host refused them.
func (r *shardRig) update(d time.Duration, ev activities.ShardEvents, refused *[]bool) {
	r.env.RegisterDelayedCallback(func() {
		r.env.UpdateWorkflow(WatchEventsUpdate, fmt.Sprint(d), &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(error) {
				r.mu.Lock()
				*refused = append(*refused, true)
				r.mu.Unlock()
			},
			OnComplete: func(_ any, err error) {
				r.mu.Lock()
				*refused = append(*refused, err != nil)
				r.mu.Unlock()
			},
		}, ev)
	}, d)
}

// TestShardEventsByUpdateRefusedWhenStale: events sent by update that the
// host would ignore (another generation) are refused by its validator,
// before they cost a workflow task; the generation it watches is taken and
// decided on as a signal's.
func TestShardEventsByUpdateRefusedWhenStale(t *testing.T) {
	r := newShardRig(t)
	var refused []bool
	r.update(time.Minute, dead(7), &refused)
	r.update(2*time.Minute, dead(1), &refused)
	r.update(3*time.Minute, dead(1), &refused)
	st := r.run(managed(nil))
	if !same(refused, []bool{true, false, true}) {
		t.Fatalf("refused %v, want generation 7 refused, 1 taken, 1 again refused (the host had moved on to 2)", refused)
	}
	if !same(r.ops, []proc.OpType{proc.OpStart}) {
		t.Fatalf("ops %v, want the one start generation 1 called for", r.ops)
	}
	wantEvents(t, st, EventRestartSuccess)
}
