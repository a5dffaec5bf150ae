package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// dumpStuckHosts prints the tail of each host workflow that accepted an op
// update and has not completed it.
func (e *env) dumpStuckHosts(t *testing.T, items []proc.Item) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	shown := 0
	for _, it := range items {
		id := workflows.HostWorkflowID(it.Target.HostID())
		iter := e.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var lines []string
		open := 0
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				break
			}
			lines = append(lines, fmt.Sprintf("%d %s %s", ev.GetEventId(), ev.GetEventTime().AsTime().Format("15:04:05.000"), strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")))
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
				open++
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
				open--
			}
		}
		if open > 0 || len(lines) < 3 {
			t.Logf("%s: %d open updates:\n%s", id, open, strings.Join(lines[max(0, len(lines)-25):], "\n"))
			shown++
			if shown > 4 {
				return
			}
		}
	}
}
