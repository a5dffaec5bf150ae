package activities

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-sh/drover/policies"
)

// exeLine is the X line the poll printed for entry i.
func exeLine(out string, i int) (string, bool) {
	prefix := "X\t" + strconv.Itoa(i) + "\t"
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimPrefix(l, prefix), true
		}
	}
	return "", false
}

// TestWatchSkipsTheExeOfAKnownIncarnation: once a poll found a process
// alive, later polls do not read its exe and cmdline again (forks that
// cost the host on every poll) and still judge it alive; a pid file that
// names another process, or a pid whose start time differs, is read in
// full, so a dead process is never taken for alive.
func TestWatchSkipsTheExeOfAKnownIncarnation(t *testing.T) {
	dir := t.TempDir()
	e := watchEntry(t, dir, "proc-known")
	w := newWatcher(WatchInput{Entries: []WatchEntry{e}}, linuxPlatform{login: "root"})

	first := runLocal(t, w.pollScript(policies.HealthCheckTimeout))
	if exe, _ := exeLine(first, 0); !strings.HasSuffix(exe, "/proc-known") {
		t.Fatalf("the first poll must read the exe; X line %q\n%s", exe, first)
	}
	if evs := w.observe(first); len(evs) != 0 {
		t.Fatalf("first poll: want nothing to report, got %+v", evs)
	}

	second := runLocal(t, w.pollScript(policies.HealthCheckTimeout))
	if exe, ok := exeLine(second, 0); !ok || exe != "" {
		t.Fatalf("a known incarnation's exe must not be read again; X line %q (found %v)\n%s", exe, ok, second)
	}
	if evs := w.observe(second); len(evs) != 0 {
		t.Fatalf("second poll: the known process is alive, want nothing to report, got %+v", evs)
	}

	// The same pid with another start time is another process: read.
	w.known[0].start++
	third := runLocal(t, w.pollScript(policies.HealthCheckTimeout))
	if exe, _ := exeLine(third, 0); !strings.HasSuffix(exe, "/proc-known") {
		t.Fatalf("a pid whose start time differs must be read in full; X line %q", exe)
	}
	if evs := w.observe(third); len(evs) != 0 {
		t.Fatalf("third poll: want nothing to report, got %+v", evs)
	}

	// The pid file now names another live process (not proc-known): it is
	// read, and the process is dead as far as supervision is concerned.
	other := exec.Command("sleep", "300")
	must(t, other.Start())
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	must(t, os.WriteFile(filepath.Join(dir, "proc-known.pid"), []byte(strconv.Itoa(other.Process.Pid)+"\n"), 0o644))
	fourth := runLocal(t, w.pollScript(policies.HealthCheckTimeout))
	if exe, _ := exeLine(fourth, 0); !strings.HasSuffix(exe, "/sleep") {
		t.Fatalf("another pid must be read in full; X line %q", exe)
	}
	if evs := w.observe(fourth); len(evs) != 1 || evs[0].Kind != WatchDead {
		t.Fatalf("a pid file naming another program: want the process dead, got %+v", evs)
	}
}
