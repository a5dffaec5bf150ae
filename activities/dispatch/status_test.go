package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// cutShort stands in for a server that holds registry reads until the
// batch's own context ends, as a loaded one did when the batch's
// heartbeats stopped reaching it and the SDK gave the attempt up.
type cutShort struct {
	client.Client
	end context.CancelFunc
}

func (s *cutShort) ListWorkflow(ctx context.Context, _ *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	s.end()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *cutShort) DescribeWorkflowExecution(ctx context.Context, _, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	s.end()
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestStatusBatchCutShortIsRetriedNotAnswered: a status batch whose own
// context ends while it reads registries fails as a whole, so the attempt
// is retried; it never answers its hosts 9199 "context canceled" for
// reads it cut short itself (at 10,000 identities on a loaded server, a
// hundred hosts did).
func TestStatusBatchCutShortIsRetriedNotAnswered(t *testing.T) {
	testBatchCutShort(t, (*Dispatcher).Status)
}

// testBatchCutShort runs a read batch of two hosts whose registry reads
// end its own context, and wants it to fail as a whole.
func testBatchCutShort(t *testing.T, batch func(*Dispatcher, context.Context, workflows.StatusInput) ([]workflows.HostReply, error)) {
	hosts := []inventory.Host{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}}
	inv, err := inventory.New("/dev/null", inventory.Host{User: "root", IdentityFile: "/dev/null"}, nil, hosts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := &Dispatcher{Client: &cutShort{end: cancel}, TaskQueue: "q", Inventory: inv, Acts: &activities.Activities{Inventory: inv}}
	var items []proc.Item
	for _, h := range hosts {
		items = append(items, proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "ns", Name: "p"}})
	}
	replies, err := batch(d, ctx, workflows.StatusInput{TaskID: "T", Items: items})
	if !errors.Is(err, context.Canceled) || replies != nil {
		t.Fatalf("want the batch to fail with its context's end and answer nothing; got %v and %+v", err, replies)
	}
}

// busyServer stands in for a server too loaded to answer the listing or
// one host's describe in time; the other host never registered anything.
type busyServer struct {
	client.Client
	busy string
}

func (s *busyServer) ListWorkflow(context.Context, *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	return nil, serviceerror.NewDeadlineExceeded("context deadline exceeded")
}

func (s *busyServer) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if id == s.busy {
		return nil, serviceerror.NewDeadlineExceeded("context deadline exceeded")
	}
	return nil, serviceerror.NewNotFound("workflow not found")
}

// TestStatusBatchAnswersOnlyWhatItRead: a host whose registry a busy
// engine did not give within the read budget is not answered (at 10,000
// identities 141 hosts answered 9199 "read the registry ... deadline
// exceeded"): the batch fails so that it is tried again, and returns the
// answers of the hosts it did read, which are signalled to the task.
func TestStatusBatchAnswersOnlyWhatItRead(t *testing.T) {
	defer func(b time.Duration) { registryReadBudget = b }(registryReadBudget)
	registryReadBudget = 2 * time.Second
	hosts := []inventory.Host{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}}
	inv, err := inventory.New("/dev/null", inventory.Host{User: "root", IdentityFile: "/dev/null"}, nil, hosts)
	if err != nil {
		t.Fatal(err)
	}
	busy := workflows.HostWorkflowID(proc.HostID{IP: "10.0.0.1"})
	d := &Dispatcher{Client: &busyServer{busy: busy}, TaskQueue: "q", Inventory: inv, Acts: &activities.Activities{Inventory: inv}}
	var items []proc.Item
	for _, h := range hosts {
		items = append(items, proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "ns", Name: "p"}})
	}
	replies, err := d.Status(context.Background(), workflows.StatusInput{TaskID: "T", Items: items, Offset: 10})
	if err == nil || !strings.Contains(err.Error(), "1 of 2 hosts not read") || !strings.Contains(err.Error(), busy) {
		t.Errorf("want the batch to fail for the host the engine did not read, got %v", err)
	}
	if len(replies) != 1 || replies[0].Index != 11 || replies[0].Result.Code != proc.CodeNotRegistered {
		t.Fatalf("want only the other host's own answer (not registered), got %+v", replies)
	}
}
