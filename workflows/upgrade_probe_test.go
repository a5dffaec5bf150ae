//go:build upgradeprobe

package workflows

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayWithUpgradeProbe replays the recorded histories against a
// build with one guarded change to the host workflow (`go test -tags
// upgradeprobe`): every running workflow survives the upgrade. The same
// change unguarded fails (TMPRL1100, the SDK's nondeterminism error) on a
// history with a supervision decision, so the corpus does reach that path.
func TestReplayWithUpgradeProbe(t *testing.T) {
	dir := filepath.Join("testdata", "histories")
	replayDir(t, dir)

	probeUnguarded = true
	defer func() { probeUnguarded = false }()
	err := replayFile(filepath.Join(dir, "host-restart.json"))
	if err == nil || !strings.Contains(err.Error(), "TMPRL1100") {
		t.Fatalf("an unguarded change replayed without a nondeterminism error: %v", err)
	}
}
