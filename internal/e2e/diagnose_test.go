package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// dumpStuckHosts prints, for a failed test, the tail of the history of each
// host workflow that accepted an op update and has not completed it (of
// every one, for a single item): its updates, local ops and activities
// with their inputs and results.
func (e *env) dumpStuckHosts(t *testing.T, items []proc.Item) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	shown := 0
	for _, it := range items {
		id := workflows.HostWorkflowID(it.Target.HostID())
		lines, open := e.historyLines(ctx, id)
		if open > 0 || len(lines) < 3 || len(items) == 1 {
			t.Logf("%s: %d open updates:\n%s", id, open, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			shown++
			if shown > 4 {
				return
			}
		}
	}
}

// dumpWorkflow prints, for a failed test, the tail of a workflow's history.
func (e *env) dumpWorkflow(t *testing.T, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lines, _ := e.historyLines(ctx, id)
	t.Logf("%s:\n%s", id, strings.Join(lines[max(0, len(lines)-60):], "\n"))
}

// historyLines is a workflow's history a line an event, with its updates,
// signals, local ops and activities' inputs and results, and the updates
// it accepted and has not completed.
func (e *env) historyLines(ctx context.Context, id string) (lines []string, open int) {
	{
		iter := e.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				break
			}
			line := fmt.Sprintf("%d %s %s", ev.GetEventId(), ev.GetEventTime().AsTime().Format("15:04:05.000"), strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_"))
			if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() != "Version" {
				line += fmt.Sprintf(" %s %v", m.GetMarkerName(), m.GetFailure().GetMessage())
				for k, p := range m.GetDetails() {
					if k == "data" || k == "result" {
						d := payloadText(p)
						line += " " + k + "=" + d[:min(len(d), 300)]
					}
				}
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				d := payloadText(a.GetInput())
				line += " " + a.GetActivityType().GetName() + " " + d[:min(len(d), 300)]
			}
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
				d := payloadText(a.GetResult())
				line += " " + d[:min(len(d), 300)]
			}
			if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
				d := payloadText(a.GetInput())
				line += " " + a.GetSignalName() + " " + d[:min(len(d), 300)]
			}
			lines = append(lines, line)
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
				open++
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
				open--
			}
		}
	}
	return lines, open
}

// dumpLeftovers prints, for a failed cancel test, the host workflows of the
// requests whose gated control scripts still run on the bed's hosts.
func (e *env) dumpLeftovers(t *testing.T) {
	seen := map[string]bool{}
	for _, h := range e.bed.Hosts {
		out, _ := h.Exec("pgrep -fa 'data/gat[e]' | grep -o 'GSETASK:[0-9:]*#[0-9]*' | sort -u")
		for _, id := range strings.Fields(out) {
			seen[id] = true
		}
	}
	t.Logf("leftover requests: %v", seen)
	n := 0
	for id := range seen {
		var i int
		fmt.Sscanf(id[strings.LastIndex(id, "#")+1:], "%d", &i)
		ip := fmt.Sprintf("10.7.%d.%d", i/250, i%250+1)
		e.dumpStuckHosts(t, []proc.Item{{Target: proc.Target{IP: ip}}})
		if n++; n > 3 {
			return
		}
	}
}

// payloadText is the first payload's data, or nothing.
func payloadText(p *commonpb.Payloads) string {
	if len(p.GetPayloads()) == 0 {
		return ""
	}
	return string(p.GetPayloads()[0].GetData())
}
