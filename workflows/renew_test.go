package workflows

import (
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/proc"
)

// TestRenewSignalStartsANewRunWithTheDigest: a renew signal takes effect
// at the host's next wake (here an op), as a continue-as-new carrying the
// registry; without one, the host keeps its run.
func TestRenewSignalStartsANewRunWithTheDigest(t *testing.T) {
	for _, renew := range []bool{false, true} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.RegisterWorkflowWithOptions(Host, workflow.RegisterOptions{Name: HostWorkflowName})
		spec := proc.Spec{ProcName: "svc", SetupPath: "/data/app", PidPath: "/data/app/svc.pid"}
		register := HostRequest{RequestID: "t#0", Op: proc.OpSpecRegister, Process: proc.ProcessID{Namespace: "web", Name: "svc"}, Spec: &spec}
		if renew {
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(RenewSignal, nil) }, time.Second)
		}
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(OpSignal, register) }, 2*time.Second)
		env.ExecuteWorkflow(HostWorkflowName, HostState{Host: proc.HostID{IP: "10.0.0.1"}})

		var can *workflow.ContinueAsNewError
		renewed := env.IsWorkflowCompleted() && errors.As(env.GetWorkflowError(), &can)
		if renewed != renew {
			t.Fatalf("renew signal %v: continued as new %v (%v)", renew, renewed, env.GetWorkflowError())
		}
		if !renew {
			continue
		}
		var next HostState
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
			t.Fatal(err)
		}
		if len(next.Entries) != 1 || next.Entries[0].Process.Name != "svc" {
			t.Fatalf("the new run's registry: %+v", next.Entries)
		}
	}
}
