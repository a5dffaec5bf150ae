package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/proc"
)

// hostFilesRun runs a host workflow with one registered process, whose
// app.conf was drifted, and sends it req; the file and host activities
// answer files and op. It returns the reply, the registry afterwards and
// the ops HostOp ran.
func hostFilesRun(t *testing.T, req HostRequest, files activities.FilesOutput) (proc.HostResult, []Entry, []proc.OpType) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Host, workflow.RegisterOptions{Name: HostWorkflowName})
	var a *activities.Activities
	env.RegisterActivity(a)
	var ops []proc.OpType
	env.OnActivity(a.HostFiles, mock.Anything, mock.Anything).Return(files, nil)
	env.OnActivity(a.HostOp, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.HostOpInput) (activities.HostOpOutput, error) {
			ops = append(ops, in.Op)
			return activities.HostOpOutput{Result: proc.HostResult{Code: proc.CodeSuccess, Message: "success"}, Alive: true, Pid: 7}, nil
		})
	var reply HostReply
	env.OnSignalExternalWorkflow(mock.Anything, "task", "", ReplySignal, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error { reply = arg.(HostReply); return nil })
	p := proc.ProcessID{Namespace: "web", Name: "svc"}
	spec := proc.Spec{ProcName: "svc", SetupPath: "/data/app", PidPath: "/data/app/svc.pid", ReloadCmd: "./reload.sh",
		ConfigMap: []proc.ConfigFile{{Path: "/data/app/app.conf", MD5: "0123456789abcdef0123456789abcdef"}}}
	st := HostState{Host: proc.HostID{IP: "10.0.0.1"}, Entries: []Entry{{Process: p, Spec: spec,
		Registration: proc.Registration{Drifted: []string{"/data/app/app.conf"}}}}}
	req.RequestID, req.ReplyTo, req.Process, req.Target = "task#0", "task", p, proc.Target{IP: "10.0.0.1"}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(OpSignal, req) }, time.Second)
	var entries []Entry
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(RegistryQuery)
		if err != nil {
			t.Errorf("registry query: %v", err)
			return
		}
		if err := v.Get(&entries); err != nil {
			t.Errorf("registry: %v", err)
		}
	}, time.Minute)
	env.ExecuteWorkflow(HostWorkflowName, st)
	return reply.Result, entries, ops
}

var pushed = proc.PushFile{Path: "/data/app/app.conf", Mode: 0o640,
	Content: proc.FileRef{SHA256: "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03", MD5: "6f5902ac237024bdd0c176cb93063dc4", Size: 6}}

func TestPushThenReloadRecordsTheMD5AndReloads(t *testing.T) {
	res, entries, ops := hostFilesRun(t,
		HostRequest{Op: proc.OpPushConfig, Files: &proc.FileOp{Files: []proc.PushFile{pushed}, Then: proc.ThenReload}},
		activities.FilesOutput{Result: proc.HostResult{Code: proc.CodeSuccess, Message: "pushed /data/app/app.conf"}, Written: []string{pushed.Path}})
	if res.Code != proc.CodeSuccess || res.Message != "pushed /data/app/app.conf; then reload: success" {
		t.Fatalf("reply: %+v", res)
	}
	if len(ops) != 1 || ops[0] != proc.OpReload {
		t.Fatalf("after the push the host ran %v, want one reload", ops)
	}
	cm := entries[0].Spec.ConfigMap
	if len(cm) != 1 || cm[0].MD5 != pushed.Content.MD5 || cm[0].Source == nil || *cm[0].Source != pushed.Content || cm[0].Mode != 0o640 {
		t.Fatalf("configmap after the push: %+v", cm)
	}
	if len(entries[0].Drifted) != 0 {
		t.Fatalf("a pushed file is no longer drifted: %v", entries[0].Drifted)
	}
}

func TestFailedPushLeavesTheRegistryAndRunsNothing(t *testing.T) {
	res, entries, ops := hostFilesRun(t,
		HostRequest{Op: proc.OpPushConfig, Files: &proc.FileOp{Files: []proc.PushFile{pushed}, Then: proc.ThenRestart}},
		activities.FilesOutput{Result: proc.HostResult{Code: proc.CodeUnreachable, Message: "connection lost"}})
	if res.Code != proc.CodeUnreachable {
		t.Fatalf("reply: %+v", res)
	}
	if len(ops) != 0 {
		t.Fatalf("a failed push must not restart: ran %v", ops)
	}
	if cm := entries[0].Spec.ConfigMap; cm[0].MD5 != "0123456789abcdef0123456789abcdef" || cm[0].Source != nil {
		t.Fatalf("configmap after a failed push: %+v", cm)
	}
}

func TestFileOpTypeWithoutFilesIsUnknown(t *testing.T) {
	res, _, ops := hostFilesRun(t, HostRequest{Op: proc.OpPushConfig}, activities.FilesOutput{})
	if res.Code != proc.CodeBadOpType || len(ops) != 0 {
		t.Fatalf("op_type 110 sent without files: %+v, ran %v", res, ops)
	}
}

func TestRepairClearsDrift(t *testing.T) {
	res, entries, _ := hostFilesRun(t, HostRequest{Op: proc.OpRepairConfig, Files: &proc.FileOp{}},
		activities.FilesOutput{Result: proc.HostResult{Code: proc.CodeSuccess, Message: "restored /data/app/app.conf"}, Written: []string{pushed.Path}})
	if res.Code != proc.CodeSuccess || len(entries[0].Drifted) != 0 {
		t.Fatalf("repair: %+v, drifted %v", res, entries[0].Drifted)
	}
}

// TestFileOpTakesItsTasksCancel: a task cancelled while its config push
// runs ends the push (its activity sees its context end) and answers 9109;
// the reload that was to follow never runs.
func TestFileOpTakesItsTasksCancel(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Host, workflow.RegisterOptions{Name: HostWorkflowName})
	var ops []proc.OpType
	ended := make(chan struct{}, 1)
	env.RegisterActivityWithOptions(func(ctx context.Context, in activities.FilesInput) (activities.FilesOutput, error) {
		go env.SignalWorkflow(CancelTaskSignal, "T")
		for {
			select {
			case <-ctx.Done():
				ended <- struct{}{}
				return activities.FilesOutput{Result: proc.Fail(proc.CodeTimeout, "transfer stopped: %v", ctx.Err())}, nil
			case <-time.After(100 * time.Millisecond):
				activity.RecordHeartbeat(ctx)
			}
		}
	}, activity.RegisterOptions{Name: "HostFiles"})
	env.RegisterActivityWithOptions(func(_ context.Context, in activities.HostOpInput) (activities.HostOpOutput, error) {
		ops = append(ops, in.Op)
		return activities.HostOpOutput{Result: proc.HostResult{Code: proc.CodeSuccess}}, nil
	}, activity.RegisterOptions{Name: "HostOp"})
	p := proc.ProcessID{Namespace: "web", Name: "svc"}
	spec := proc.Spec{ProcName: "svc", SetupPath: "/data/app", PidPath: "/data/app/svc.pid", ReloadCmd: "./reload.sh"}
	st := HostState{Host: proc.HostID{IP: "10.0.0.1"}, Entries: []Entry{{Process: p, Spec: spec}}}
	req := HostRequest{RequestID: "T#0", Op: proc.OpPushConfig, Process: p, Target: proc.Target{IP: "10.0.0.1"},
		Files: &proc.FileOp{Files: []proc.PushFile{pushed}, Then: "reload"}}
	var got proc.HostResult
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(OpUpdate, req.RequestID, &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("rejected: %v", err) },
			OnComplete: func(v any, err error) {
				if err != nil {
					t.Errorf("update: %v", err)
					return
				}
				got = v.(proc.HostResult)
			},
		}, req)
	}, time.Second)
	env.ExecuteWorkflow(HostWorkflowName, st)
	select {
	case <-ended:
	default:
		t.Fatal("the push never saw its context end")
	}
	if got.Code != proc.CodeCancelled || !strings.Contains(got.Message, "cancelled while running") {
		t.Fatalf("answer %+v, want 9109 cancelled while running", got)
	}
	if len(ops) != 0 {
		t.Fatalf("ops run after the cancelled push: %v", ops)
	}
}
