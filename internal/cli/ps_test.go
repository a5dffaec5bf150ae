package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

func TestPsPutsWhatIsWrongFirst(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ago := func(d time.Duration) int64 { return now.Add(-d).Unix() }
	digests := []engine.HostDigest{
		{Host: proc.HostID{IP: "10.0.0.1"}, Digest: workflows.Digest{Procs: []workflows.ProcDigest{
			{Namespace: "web", Name: "svc", Managed: true, Expected: true, Actual: "running", Pid: 41, Supervised: true, SeenAt: ago(time.Hour)},
			{Namespace: "web", Name: "cron", Expected: false, Actual: "stopped", SeenAt: ago(3 * time.Minute)},
		}}},
		{Host: proc.HostID{IP: "10.0.0.2"}, Digest: workflows.Digest{Procs: []workflows.ProcDigest{
			// Killed, and its restarts fail: it should run and does not.
			{Namespace: "web", Name: "svc", Managed: true, Expected: true, Actual: "stopped", SeenAt: ago(5 * time.Second),
				RetryAt: now.Unix() + 10, Restarts: []int64{ago(25 * time.Hour), ago(time.Minute), ago(5 * time.Second)},
				LastEvent: workflows.EventRestartFailed, LastEventAt: ago(5 * time.Second)},
			{Namespace: "db", Name: "pg", Expected: true, GaveUp: true, Actual: "stopped"},
			{Namespace: "db", Name: "new"}, // registered, never started
		}}},
	}
	rows := psRows(digests, psFlags{}, now)
	sortRows(rows)
	var out bytes.Buffer
	if err := printPs(&out, rows, false, now); err != nil {
		t.Fatal(err)
	}
	got := fieldsOf(out.String())
	want := [][]string{
		{"HOST", "PROCESS", "EXPECTED", "ACTUAL", "MANAGED", "PID", "RESTARTS(24h)", "LAST", "EVENT", "SEEN"},
		{"0:10.0.0.2", "web/svc", "running", "stopped", "yes", "-", "2", "process_restart_failed", "5s", "ago", "5s", "ago"},
		{"0:10.0.0.2", "db/pg", "running", "stopped", "gave-up", "-", "0", "-", "-"},
		{"0:10.0.0.1", "web/cron", "stopped", "stopped", "no", "-", "0", "-", "3m0s", "ago"},
		{"0:10.0.0.1", "web/svc", "running", "running", "yes", "41", "0", "-", "supervised"},
		{"0:10.0.0.2", "db/new", "stopped", "unknown", "no", "-", "0", "-", "-"},
		{"5", "processes,", "2", "should", "run", "and", "do", "not"},
	}
	if len(got) != len(want) {
		t.Fatalf("want %d lines:\n%s", len(want), out.String())
	}
	for i := range want {
		if strings.Join(got[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d: %v, want %v", i, got[i], want[i])
		}
	}
	for state, n := range map[string]int{"failed": 2, "stopped": 3, "running": 1} {
		if got := filterState(rows, state); len(got) != n {
			t.Errorf("--state %s: %d rows, want %d", state, len(got), n)
		}
	}
	if rows := psRows(digests, psFlags{namespace: "web", name: "svc"}, now); len(rows) != 2 {
		t.Errorf("--namespace web --name svc: %d rows", len(rows))
	}
	if _, errOut, code := runStarter(t, testInventory, "ps", "--state", "sick"); code != ExitBadRequest || !strings.Contains(errOut, "--state") {
		t.Errorf("--state sick: exit %d %s", code, errOut)
	}
}

func TestPsDoesNotClaimSupervisionThatFailed(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	running := workflows.ProcDigest{Namespace: "web", Name: "svc", Managed: true, Expected: true, Actual: "running", Pid: 7,
		Supervised: true, SeenAt: now.Add(-time.Hour).Unix()}
	digests := []engine.HostDigest{
		{Host: proc.HostID{IP: "10.0.0.1"}, Digest: workflows.Digest{Procs: []workflows.ProcDigest{running},
			WatchFailedAt: now.Add(-2 * time.Minute).Unix()}},
		// A failure before the process was last seen is history.
		{Host: proc.HostID{IP: "10.0.0.2"}, Digest: workflows.Digest{Procs: []workflows.ProcDigest{running},
			WatchFailedAt: now.Add(-2 * time.Hour).Unix()}},
	}
	rows := psRows(digests, psFlags{}, now)
	var out bytes.Buffer
	if err := printPs(&out, rows, false, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.HasSuffix(lines[1], "1h0m ago, supervision failed 2m0s ago") || !strings.HasSuffix(lines[2], "supervised") {
		t.Fatalf("SEEN after a failed poll:\n%s", out.String())
	}
}
