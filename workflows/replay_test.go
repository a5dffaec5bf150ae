package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplayRecordedHistories replays histories recorded from real runs
// against the real dev server (internal/e2e, DROVER_RECORD_HISTORIES). A
// change to workflow code that would break running workflows fails here;
// such a change needs workflow.GetVersion.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Operate, workflow.RegisterOptions{Name: OperateWorkflowName})
			r.RegisterWorkflowWithOptions(Host, workflow.RegisterOptions{Name: HostWorkflowName})
			r.RegisterWorkflowWithOptions(WatchShard, workflow.RegisterOptions{Name: WatchShardWorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
