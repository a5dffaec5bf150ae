package activities

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/transport"
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

// runWithOnly runs script with a PATH holding only the named commands.
func runWithOnly(t *testing.T, script transport.Command, cmds ...string) string {
	t.Helper()
	bin := t.TempDir()
	for _, c := range cmds {
		p, err := exec.LookPath(c)
		must(t, err)
		must(t, os.Symlink(p, filepath.Join(bin, c)))
	}
	sh, err := exec.LookPath("sh")
	must(t, err)
	cmd := exec.Command(sh, append([]string{"-c", script.Script, "drover"}, script.Args...)...)
	cmd.Env = []string{"PATH=" + bin}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("poll failed: %v\n%s %q", err, script.Name, script.Args)
	}
	return string(out)
}

// TestWatchReadsTheHostOncePerBoot: once a poll read the host (cpus, clock
// ticks, page size, memory, boot time, login user, for the boot its
// boot_id names), later polls fork nothing but date (they run with only
// date on PATH) and report the host as known; a poll that finds another
// boot id reads the host in full, and so does every hostFullEvery-th.
func TestWatchReadsTheHostOncePerBoot(t *testing.T) {
	if _, err := os.Stat("/proc/sys/kernel/random/boot_id"); err != nil {
		t.Skip("no boot_id on this kernel: every poll reads the host in full")
	}
	dir := t.TempDir()
	e := watchEntry(t, dir, "proc-host")
	w := newWatcher(WatchInput{Entries: []WatchEntry{e}}, linuxPlatform{login: "root"})
	first := runLocal(t, w.pollScript(policies.HealthCheckTimeout))
	if evs := w.observe(first); len(evs) != 0 {
		t.Fatalf("first poll: want nothing to report, got %+v", evs)
	}
	h1, _, err := ParseProbe(first, 1)
	must(t, err)
	if w.host == nil {
		t.Fatalf("the first poll must make the host known; host line %+v", h1)
	}

	second := runWithOnly(t, w.pollScript(policies.HealthCheckTimeout), "date")
	h2, _, err := ParseProbe(second, 1)
	must(t, err)
	if evs := w.observe(second); len(evs) != 0 {
		t.Fatalf("second poll (date alone on PATH): want nothing to report, got %+v\n%s", evs, second)
	}
	if h2.BootID != h1.BootID || h2.CPUs != h1.CPUs || h2.ClockTicks != h1.ClockTicks || h2.MemTotal != h1.MemTotal ||
		h2.BootTime != h1.BootTime || h2.PageSize != h1.PageSize || h2.User != h1.User || h2.Ticks < h1.Ticks || h2.Now == 0 {
		t.Fatalf("a known host must be reported as the first poll read it, with its ticks read again:\nfirst  %+v\nsecond %+v", h1, h2)
	}

	// Another boot: the known values (here a wrong memory size) are not
	// used, and the host is read again.
	w.host.bootID, w.host.mem = "another-boot", 1
	third := runLocal(t, w.pollScript(policies.HealthCheckTimeout))
	h3, _, err := ParseProbe(third, 1)
	must(t, err)
	if h3.MemTotal != h1.MemTotal || h3.BootID != h1.BootID {
		t.Fatalf("another boot id must make the poll read the host: got %+v, want memory %d", h3, h1.MemTotal)
	}
	_ = w.observe(third)

	w.hostPolls = hostFullEvery
	// watch.sh's fourth argument is the known boot id.
	if s := w.pollScript(policies.HealthCheckTimeout); s.Args[3] != "" {
		t.Fatalf("poll %d must read the host in full, got a script that knows it: %q", hostFullEvery, s.Args)
	}
}
