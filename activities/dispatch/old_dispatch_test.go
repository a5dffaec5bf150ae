package dispatch

// Tests of the Dispatch activity (old_dispatch.go): they go with it.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// hostsServer stands in for the Temporal server's host workflows: status
// by workflow id (absent: none yet), and how often each was started,
// signalled and described.
type hostsServer struct {
	client.Client
	mu        sync.Mutex
	status    map[string]enums.WorkflowExecutionStatus
	raced     map[string]bool // refused once, then found running
	signalled map[string]workflows.HostRequest
	described map[string]int
	policies  []enums.WorkflowIdReusePolicy
}

func (s *hostsServer) SignalWithStartWorkflow(_ context.Context, id, _ string, arg any, opts client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policies = append(s.policies, opts.WorkflowIDReusePolicy)
	st, exists := s.status[id]
	if s.raced[id] {
		s.raced[id] = false
		s.status[id] = enums.WORKFLOW_EXECUTION_STATUS_RUNNING
		return nil, serviceerror.NewWorkflowExecutionAlreadyStarted("started", "", "")
	}
	if exists && st != enums.WORKFLOW_EXECUTION_STATUS_RUNNING && opts.WorkflowIDReusePolicy == enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE {
		return nil, serviceerror.NewWorkflowExecutionAlreadyStarted("started", "", "")
	}
	s.status[id] = enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	s.signalled[id] = arg.(workflows.HostRequest)
	return nil, nil
}

func (s *hostsServer) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.described[id]++
	return &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: s.status[id]}}, nil
}

// TestDispatchNeverReplacesAClosedHostWorkflow: a new host's workflow is
// started, a running one signalled, and a terminated one is neither: its
// item answers 9108 naming restore and forget. Only a refused start costs a
// describe. Each request carries its deadline.
func TestDispatchNeverReplacesAClosedHostWorkflow(t *testing.T) {
	var hosts []inventory.Host
	for _, ip := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"} {
		hosts = append(hosts, inventory.Host{IP: ip})
	}
	inv, err := inventory.New("/dev/null", inventory.Host{User: "root", IdentityFile: "/dev/null"}, nil, hosts)
	if err != nil {
		t.Fatal(err)
	}
	srv := &hostsServer{
		status: map[string]enums.WorkflowExecutionStatus{
			"host:0:10.0.0.2": enums.WORKFLOW_EXECUTION_STATUS_TERMINATED,
			"host:0:10.0.0.4": enums.WORKFLOW_EXECUTION_STATUS_RUNNING,
		},
		raced:     map[string]bool{"host:0:10.0.0.3": true}, // restored meanwhile
		signalled: map[string]workflows.HostRequest{}, described: map[string]int{},
	}
	d := &Dispatcher{Client: srv, TaskQueue: "q", Inventory: inv}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(d)
	var items []proc.Item
	for _, h := range hosts {
		items = append(items, proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "ns", Name: "p"}})
	}
	issued := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	v, err := env.ExecuteActivity(d.Dispatch, workflows.DispatchInput{ReplyTo: "T", TaskID: "T", Op: proc.OpStart, Items: items, Issued: issued})
	if err != nil {
		t.Fatal(err)
	}
	var out workflows.DispatchOutput
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Answered) != 1 || out.Answered[0].Index != 1 || out.Answered[0].Result.Code != proc.CodeHostLost {
		t.Fatalf("answered %+v, want item 1 only, 9108", out.Answered)
	}
	msg := out.Answered[0].Result.Message
	for _, want := range []string{"terminated", "starter host restore 0:10.0.0.2", "starter host forget 0:10.0.0.2"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("message %q does not say %q", msg, want)
		}
	}
	if _, ok := srv.signalled["host:0:10.0.0.2"]; ok || srv.status["host:0:10.0.0.2"] != enums.WORKFLOW_EXECUTION_STATUS_TERMINATED {
		t.Fatal("the terminated host workflow was replaced")
	}
	for _, id := range []string{"host:0:10.0.0.1", "host:0:10.0.0.3", "host:0:10.0.0.4"} {
		req, ok := srv.signalled[id]
		if !ok || !req.Deadline.After(issued) {
			t.Fatalf("%s: request %+v delivered %v, want it with a deadline after %s", id, req, ok, issued)
		}
	}
	if srv.described["host:0:10.0.0.1"]+srv.described["host:0:10.0.0.4"] != 0 || srv.described["host:0:10.0.0.2"] != 1 || srv.described["host:0:10.0.0.3"] != 1 {
		t.Fatalf("describes %v: want one for each refused start only", srv.described)
	}
	for _, p := range srv.policies {
		if p != enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE {
			t.Fatalf("a start allowed a duplicate: %v", srv.policies)
		}
	}
}
