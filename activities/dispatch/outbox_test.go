package dispatch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// slowSignals stands in for a loaded server: the first signal hangs until
// released, then fails; later ones are taken.
type slowSignals struct {
	client.Client
	mu      sync.Mutex
	calls   int
	began   chan struct{}
	release chan struct{}
	taken   [][]workflows.HostReply
}

func (s *slowSignals) SignalWorkflow(_ context.Context, _, _, _ string, arg any) error {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if first && s.began != nil {
		close(s.began)
		<-s.release
		return errors.New("context deadline exceeded")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taken = append(s.taken, arg.([]workflows.HostReply))
	return nil
}

func (s *slowSignals) answers() (signals, answers int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.taken {
		answers += len(t)
	}
	return len(s.taken), answers
}

func answer(i int) workflows.HostReply {
	return workflows.HostReply{Index: i, Result: proc.HostResult{Code: proc.CodeSuccess}}
}

// TestOutboxCloseWaitsOutAFailedSignal: answers a periodic signal took and
// failed to send are sent again by the batch's close, which returns only
// once the task has them (a batch whose answers were lost kept its chunk
// waiting for the batch's heartbeat timeout and a run again).
func TestOutboxCloseWaitsOutAFailedSignal(t *testing.T) {
	s := &slowSignals{began: make(chan struct{}), release: make(chan struct{})}
	d := &Dispatcher{Client: s}
	task := workflow.Execution{ID: "T/chunk-0"}
	b := d.joinOutbox(task)
	b.o.every = 10 * time.Millisecond
	b.add(answer(1))
	go b.o.tick() // the periodic signal takes the first answer and hangs
	<-s.began
	b.add(answer(2))
	done := make(chan struct{})
	go func() { b.close(context.Background()); close(done) }()
	close(s.release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return once its answers were taken")
	}
	if _, n := s.answers(); n != 2 {
		t.Fatalf("the task was signalled %d answers, want both: %+v", n, s.taken)
	}
	if len(d.outboxes) != 0 {
		t.Fatalf("the outbox of a task with no batch left stays open: %v", d.outboxes)
	}
}

// TestOutboxSendsATasksBatchesTogether: the answers of batches of one task
// that end together reach it in one signal, and another task's apart.
func TestOutboxSendsATasksBatchesTogether(t *testing.T) {
	s := &slowSignals{}
	d := &Dispatcher{Client: s}
	one, other := workflow.Execution{ID: "T/chunk-0"}, workflow.Execution{ID: "U/chunk-0"}
	a, b, c := d.joinOutbox(one), d.joinOutbox(one), d.joinOutbox(other)
	if a.o != b.o || a.o == c.o {
		t.Fatal("a task's batches on one worker must share its outbox, and only they")
	}
	for i := range 3 {
		a.add(answer(i))
		b.add(answer(10 + i))
		c.add(answer(20 + i))
	}
	a.close(context.Background())
	if _, n := s.answers(); n != 6 {
		t.Fatalf("a's close sent %d answers, want its task's 6", n)
	}
	b.close(context.Background()) // nothing of b's is left to send
	c.close(context.Background())
	if signals, n := s.answers(); signals != 2 || n != 9 {
		t.Fatalf("%d signals with %d answers, want 2 with 9: %+v", signals, n, s.taken)
	}
}

// TestOutboxBoundsASignal: a signal carries at most outboxMaxLetters
// answers, so many batches' answers never make one too large a payload.
func TestOutboxBoundsASignal(t *testing.T) {
	s := &slowSignals{}
	d := &Dispatcher{Client: s}
	b := d.joinOutbox(workflow.Execution{ID: "T"})
	for i := range 2*outboxMaxLetters + 1 {
		b.add(answer(i))
	}
	b.close(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.taken) != 3 || len(s.taken[0]) != outboxMaxLetters || len(s.taken[2]) != 1 {
		t.Fatalf("signals of %d answers, want %d, %d, 1", len(s.taken[0]), outboxMaxLetters, outboxMaxLetters)
	}
}

// TestOutboxCloseEndsAtItsDeadline: a batch whose task never takes its
// answers gives up at its attempt's deadline.
func TestOutboxCloseEndsAtItsDeadline(t *testing.T) {
	s := &slowSignals{began: make(chan struct{}), release: make(chan struct{})}
	close(s.release)
	d := &Dispatcher{Client: refusing{s}}
	b := d.joinOutbox(workflow.Execution{ID: "T"})
	b.add(answer(1))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	b.close(ctx)
	// By the clock: close ends by a context of its own with the same
	// deadline, whose timer may fire before ctx's.
	if time.Now().Before(deadline) {
		t.Fatal("close returned before its deadline with its answer not taken")
	}
}

// refusing is a server that takes no signal.
type refusing struct{ *slowSignals }

func (refusing) SignalWorkflow(context.Context, string, string, string, any) error {
	return errors.New("context deadline exceeded")
}
