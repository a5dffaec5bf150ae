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
	taken   []workflows.HostReply
}

func (s *slowSignals) SignalWorkflow(_ context.Context, _, _, _ string, arg any) error {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if first {
		close(s.began)
		<-s.release
		return errors.New("context deadline exceeded")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taken = append(s.taken, arg.([]workflows.HostReply)...)
	return nil
}

// TestReporterLastSignalHasEveryAnswer: answers a periodic signal took
// and failed to send after the batch ended are in the batch's last
// signal, not put back where no signal sends them (the chunk then waited
// for the batch's heartbeat timeout and ran it again).
func TestReporterLastSignalHasEveryAnswer(t *testing.T) {
	s := &slowSignals{began: make(chan struct{}), release: make(chan struct{})}
	r := newReporter(s, workflow.Execution{ID: "T/chunk-0"})
	r.every = 10 * time.Millisecond
	stop := r.run(context.Background())
	r.add(workflows.HostReply{Index: 1, Result: proc.HostResult{Code: proc.CodeSuccess}})
	<-s.began // the periodic signal has the first answer
	r.add(workflows.HostReply{Index: 2, Result: proc.HostResult{Code: proc.CodeSuccess}})
	done := make(chan struct{})
	go func() { stop(); close(done) }()
	// A last signal that does not wait on the periodic one ends first.
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	close(s.release)
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.taken) != 2 {
		t.Fatalf("the task was signalled %d answers, want both: %+v", len(s.taken), s.taken)
	}
}
