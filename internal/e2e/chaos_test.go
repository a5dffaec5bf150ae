package e2e

import (
	"fmt"
	"os"
	"testing"
)

// chaosFull reports whether the fault tests run at full size (`make chaos`
// sets DROVER_CHAOS=full); `make test` runs them reduced.
func chaosFull() bool { return os.Getenv("DROVER_CHAOS") == "full" }

// chaosScale picks the reduced or the full size.
func chaosScale(reduced, full int) int {
	if chaosFull() {
		return full
	}
	return reduced
}

// chaosCount adds n to one of the counters `make chaos` sums into its
// summary, by appending "name n test" to $DROVER_CHAOS_SUMMARY. Tests count
// what they actually did or saw, zeros included, so the summary shows a
// measured 0 rather than an absent one.
func chaosCount(t *testing.T, name string, n int) {
	path := os.Getenv("DROVER_CHAOS_SUMMARY")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("chaos summary: %v", err)
	}
	defer f.Close()
	// One short write per line: O_APPEND keeps lines from parallel test
	// processes whole.
	if _, err := fmt.Fprintf(f, "%s %d %s\n", name, n, t.Name()); err != nil {
		t.Fatalf("chaos summary: %v", err)
	}
}
