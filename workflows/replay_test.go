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
	RegisterWorkflows(r)
	return r.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: originalID(h)},
	})
}

// originalID is the ID a workflow that names its children after itself
// ran under, read back from a child's ID (<task id>/chunk-0 of a chunked
// task, <task id>/batch-1 of a rollout): a JSON history does not name its
// own workflow. Other histories replay under the replayer's own ID.
func originalID(h *historypb.History) string {
	for _, ev := range h.GetEvents() {
		if ev.GetEventType() != enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED {
			continue
		}
		id := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes().GetWorkflowId()
		for _, sep := range []string{"/chunk-", "/batch-"} {
			if i := strings.LastIndex(id, sep); i > 0 {
				return id[:i]
			}
		}
	}
	return ""
}

// TestReplayCorpusCoversEveryWorkflow: every workflow a worker runs has
// recorded histories in the corpus, so a change to any of them that would
// break a running one fails the replay. A rollout can wait days for its
// approval, across upgrades, as a host workflow does.
func TestReplayCorpusCoversEveryWorkflow(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string][]string{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		h, err := client.HistoryFromJSON(fh, client.HistoryJSONOptions{})
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
		recorded[name] = append(recorded[name], filepath.Base(f))
	}
	for _, d := range workflowDefinitions {
		if len(recorded[d.Name]) == 0 {
			t.Errorf("no recorded history of %s in testdata/histories (record one: DROVER_RECORD_HISTORIES, see docs/upgrades.md)", d.Name)
		}
	}
}
