package workflows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplayRecordedHistories replays histories recorded from real runs
// against the real dev server (internal/e2e, DROVER_RECORD_HISTORIES). A
// change to workflow code that would break running workflows fails here;
// such a change needs workflow.GetVersion. DROVER_REPLAY_DIR points it at
// another directory instead, such as histories exported from production
// with `temporal workflow show -o json`.
func TestReplayRecordedHistories(t *testing.T) {
	dir := os.Getenv("DROVER_REPLAY_DIR")
	if dir == "" {
		dir = filepath.Join("testdata", "histories")
	}
	replayDir(t, dir)
}

// replayDir replays every *.json history in dir against the workflows as
// built.
func replayDir(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories in %s: %v", dir, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if err := replayFile(f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}

// replayFile replays one history file, under the workflow ID it ran with
// where the code derives names from it.
func replayFile(path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	h, err := client.HistoryFromJSON(fh, client.HistoryJSONOptions{})
	if err != nil {
		return err
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(Operate, workflow.RegisterOptions{Name: OperateWorkflowName})
	r.RegisterWorkflowWithOptions(Host, workflow.RegisterOptions{Name: HostWorkflowName})
	r.RegisterWorkflowWithOptions(WatchShard, workflow.RegisterOptions{Name: WatchShardWorkflowName})
	return r.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: originalID(h)},
	})
}

// originalID is the ID a chunked task ran under, read back from its first
// chunk's ID (<task id>/chunk-0): a JSON history does not name its own
// workflow. Other histories replay under the replayer's own ID.
func originalID(h *historypb.History) string {
	for _, ev := range h.GetEvents() {
		if ev.GetEventType() != enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED {
			continue
		}
		id := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes().GetWorkflowId()
		if i := strings.LastIndex(id, "/chunk-"); i > 0 {
			return id[:i]
		}
	}
	return ""
}
