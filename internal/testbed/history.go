package testbed

import (
	"context"
	"fmt"
	"os"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
)

// SaveHistory writes one run of workflow id (the latest when runID is
// empty) to path as the engine's JSON of a History: the form the replay
// tests read from workflows/testdata.
func SaveHistory(ctx context.Context, c client.Client, id, runID, path string) error {
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return fmt.Errorf("history of %s: %w", id, err)
		}
		h.Events = append(h.Events, ev)
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
	if err != nil {
		return fmt.Errorf("history of %s: %w", id, err)
	}
	return os.WriteFile(path, b, 0o644)
}
