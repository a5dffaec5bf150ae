package workflows

import (
	"fmt"
	"testing"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// TestPendingChunkNamesEveryItem: a chunk not started yet still answers
// each of its keys, pending, so a caller polling a large task never misses
// a key.
func TestPendingChunkNamesEveryItem(t *testing.T) {
	n := 2*policies.ChunkSize + 7
	items := make([]proc.Item, n)
	for i := range items {
		items[i] = proc.Item{Target: proc.Target{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250)}, Process: proc.ProcessID{Namespace: "ns", Name: "p"}}
	}
	items[2*policies.ChunkSize].Target.AgentID = "abc"
	op := &operation{in: OperateInput{Items: items}}
	for chunk, want := range []int{policies.ChunkSize, policies.ChunkSize, 7, 0} {
		got := op.pendingChunk(chunk)
		if len(got) != want {
			t.Fatalf("chunk %d: %d items, want %d", chunk, len(got), want)
		}
		for i, r := range got {
			it := items[chunk*policies.ChunkSize+i]
			if r.Key != it.Key() || r.AgentID != it.Target.AgentID || r.Code != proc.CodeRunning {
				t.Fatalf("chunk %d item %d: %+v, want key %s pending", chunk, i, r, it.Key())
			}
		}
	}
	if got := op.pendingChunk(-1); got != nil {
		t.Fatalf("chunk -1: %v", got)
	}
}
