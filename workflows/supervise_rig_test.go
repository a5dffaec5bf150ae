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
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// rig runs one Host workflow under the test suite's skipped clock, with
// the host faked: each Watch answers the next of watches (then the test
// ends), and each HostOp answers what hostOp says. It records what the
// workflow asked of the host, and when by the workflow's clock.
type rig struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment

	// watches are the Watch answers in order: an output, or an error.
	watches []watchAnswer
	// hostOp answers one HostOp; nil answers success with the process alive.
	hostOp func(in activities.HostOpInput) activities.HostOpOutput
	// endAt ends the test at this time on the workflow's clock, when the
	// watches have not ended it before: zero means theEnd.
	endAt time.Duration
	// idle: once the watches are spent, the host is quiet (the test ends
	// at endAt) rather than the test ending at once.
	idle bool

	mu      sync.Mutex
	watched []watchCall
	ops     []opCall
	ended   bool
	// settled: the workflow returned, so a watch the test environment
	// still starts after it is not one of its calls.
	settled bool
}

type watchAnswer struct {
	out activities.WatchOutput
	err error
	// after is how long the watch runs on the workflow's clock.
	after time.Duration
}

// quiet is a watch that saw nothing until it renewed itself.
func quiet() watchAnswer { return watchAnswer{after: policies.WatchRenew} }

type watchCall struct {
	at time.Time
	in activities.WatchInput
}

type opCall struct {
	at time.Time
	in activities.HostOpInput
}

// dies, unhealthy... are Watch answers about the first watched process.
func dies() watchAnswer {
	return watchAnswer{out: activities.WatchOutput{Events: []activities.WatchEvent{{Index: 0, Kind: activities.WatchDead, Detail: "process(svc) is not running"}}}}
}

func watchSays(kind string, drifted ...string) watchAnswer {
	return watchAnswer{out: activities.WatchOutput{Events: []activities.WatchEvent{{Index: 0, Kind: kind, Detail: kind, Drifted: drifted}}}}
}

func watchFails() watchAnswer {
	return watchAnswer{err: temporal.NewNonRetryableApplicationError("the watch failed", "test", nil)}
}

// theEnd is long after any decision a test makes: a host that stopped
// watching is ended then.
const theEnd = 48 * time.Hour

func newRig(t *testing.T) *rig {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	r := &rig{t: t, env: s.NewTestWorkflowEnvironment()}
	r.env.RegisterWorkflowWithOptions(Host, workflow.RegisterOptions{Name: HostWorkflowName})
	r.env.RegisterActivityWithOptions(r.watch, activity.RegisterOptions{Name: "Watch"})
	r.env.RegisterActivityWithOptions(r.op, activity.RegisterOptions{Name: "HostOp"})
	r.env.OnActivity("Watch", mock.Anything, mock.Anything).AfterFn(r.watchTakes).Return(r.watch)
	return r
}

// next is the answer the next watch gets, and whether it ends the test.
func (r *rig) next() (watchAnswer, bool) {
	n := len(r.watched)
	switch {
	case n < len(r.watches):
		return r.watches[n], false
	case r.idle:
		return quiet(), false
	}
	return watchAnswer{}, true
}

// watchTakes is how long the next watch runs on the workflow's clock.
func (r *rig) watchTakes() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, _ := r.next()
	return a.after
}

func (r *rig) watch(_ context.Context, in activities.WatchInput) (activities.WatchOutput, error) {
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		return activities.WatchOutput{}, nil
	}
	a, last := r.next()
	r.watched = append(r.watched, watchCall{at: r.env.Now(), in: in})
	r.mu.Unlock()
	if last {
		r.end()
	}
	return a.out, a.err
}

func (r *rig) op(_ context.Context, in activities.HostOpInput) (activities.HostOpOutput, error) {
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		return success(in), nil
	}
	r.ops = append(r.ops, opCall{at: r.env.Now(), in: in})
	r.mu.Unlock()
	if r.hostOp != nil {
		return r.hostOp(in), nil
	}
	return success(in), nil
}

// success is a start or stop that did what it was asked.
func success(in activities.HostOpInput) activities.HostOpOutput {
	out := activities.HostOpOutput{Result: proc.HostResult{Code: proc.CodeSuccess, Message: "success"}}
	if in.Op != proc.OpStop && in.Op != proc.OpKill {
		out.Alive, out.Pid, out.Started = true, 4242, true
	}
	return out
}

func answer(code proc.Code, msg string) activities.HostOpOutput {
	return activities.HostOpOutput{Result: proc.HostResult{Code: code, Message: msg}}
}

// end asks the host for a new run, which ends the test with the state it
// would carry on with; the op wakes a host that waits for nothing.
func (r *rig) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	r.ended = true
	r.env.SignalWorkflow(RenewSignal, nil)
	r.env.SignalWorkflow(OpSignal, HostRequest{RequestID: "end", Op: proc.OpSpecUnregister, Process: proc.ProcessID{Namespace: "-", Name: "-"}})
}

// managed is a registered, managed resident process svc.
func managed(edit func(*proc.Spec)) Entry {
	spec := proc.Spec{ProcName: "svc", SetupPath: "/data/app", PidPath: "/data/app/svc.pid", AutoType: proc.AutoResident,
		StartRetries: 3, StartInterval: 10 * time.Second}
	if edit != nil {
		edit(&spec)
	}
	return Entry{Process: proc.ProcessID{Namespace: "web", Name: "svc"}, Spec: spec,
		Registration: proc.Registration{Managed: true, Expected: true}, Pid: 4241}
}

// execute runs the host from state until it returns. The calls it made
// are read after this without the lock: none are recorded later.
func (r *rig) execute(state HostState) {
	r.env.ExecuteWorkflow(HostWorkflowName, state)
	r.mu.Lock()
	r.settled = true
	r.mu.Unlock()
}

// run runs the host with entries until it asks for a new run, and
// returns the state it carries on with.
func (r *rig) run(entries ...Entry) HostState {
	r.t.Helper()
	end := r.endAt
	if end == 0 {
		end = theEnd
	}
	r.env.RegisterDelayedCallback(r.end, end)
	r.execute(HostState{Host: proc.HostID{IP: "10.0.0.1"}, Entries: entries})
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

// opKinds lists the ops the host ran, in order.
func (r *rig) opKinds() []proc.OpType {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []proc.OpType
	for _, c := range r.ops {
		out = append(out, c.in.Op)
	}
	return out
}

// kinds lists the events' kinds, oldest first.
func kinds(evs []Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Kind)
	}
	return out
}

func same[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (r *rig) wantOps(want ...proc.OpType) {
	r.t.Helper()
	if got := r.opKinds(); !same(got, want) {
		r.t.Fatalf("ops run on the host: %v, want %v", got, want)
	}
}

func wantEvents(t *testing.T, st HostState, want ...string) {
	t.Helper()
	if got := kinds(st.Events); !same(got, want) {
		t.Fatalf("events %v, want %v\n%s", got, want, describe(st.Events))
	}
}

func describe(evs []Event) string {
	s := ""
	for _, ev := range evs {
		s += fmt.Sprintf("  %s %s: %s\n", ev.Time.Format(time.TimeOnly), ev.Kind, ev.Detail)
	}
	return s
}

// gaps are the workflow-clock times between successive ops.
func (r *rig) gaps() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(r.ops); i++ {
		out = append(out, r.ops[i].at.Sub(r.ops[i-1].at))
	}
	return out
}
