package activities

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// runLocal runs a script with the machine's own sh, the same way the
// wrapper does on a host: `sh -c SCRIPT drover ARG...`.
func runLocal(t *testing.T, c transport.Command) string {
	t.Helper()
	out, err := shCommand(c).Output()
	if err != nil {
		t.Fatalf("%s failed: %v\n%s %q", c.Name, err, c.Script, c.Args)
	}
	return string(out)
}

// shCommand is c run by this machine's sh with its arguments.
func shCommand(c transport.Command) *exec.Cmd {
	return exec.Command("sh", append([]string{"-c", c.Script, "drover"}, c.Args...)...)
}

// startNamed starts a copy of sleep under the given program name.
func startNamed(t *testing.T, dir, name string) *exec.Cmd {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func TestProbeAgainstRealProcesses(t *testing.T) {
	dir := t.TempDir()
	p := startNamed(t, dir, "proc-test")
	stranger := exec.Command("sleep", "300")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stranger.Process.Kill(); _ = stranger.Wait() })

	live := filepath.Join(dir, "live.pid")
	stale := filepath.Join(dir, "it's a \"stale\" $(touch pwned).pid")
	garbage := filepath.Join(dir, "garbage.pid")
	missing := filepath.Join(dir, "missing.pid")
	must(t, os.WriteFile(live, []byte(strconv.Itoa(p.Process.Pid)+"\n"), 0o644))
	must(t, os.WriteFile(stale, []byte(strconv.Itoa(stranger.Process.Pid)), 0o644))
	must(t, os.WriteFile(garbage, []byte("not a pid"), 0o644))

	paths := []string{live, stale, garbage, missing}
	host, samples, err := ParseProbe(runLocal(t, ProbeScript(paths, 100*time.Millisecond)), len(paths))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatal("a pid path was executed by the shell")
	}
	if host.CPUs < 1 || host.ClockTicks < 1 || host.MemTotal == 0 || host.Now < time.Now().Unix()-5 {
		t.Fatalf("host info %+v", host)
	}
	s := samples[0]
	if !proc.Alive(s, "proc-test") || s.Pid != p.Process.Pid || s.Threads < 1 || s.RSSBytes == 0 || s.StartTicks == 0 {
		t.Fatalf("live sample %+v", s)
	}
	if s.HostTicksDelta == 0 {
		t.Fatalf("two samples expected a host tick delta: %+v", s)
	}
	if start := proc.StartUnix(s, host); start < time.Now().Unix()-60 || start > time.Now().Unix()+1 {
		t.Fatalf("start time %d is not about now", start)
	}
	if !strings.HasSuffix(s.Cmdline, "proc-test 300") {
		t.Fatalf("cmdline %q", s.Cmdline)
	}
	if st := samples[1]; !st.Exists || proc.Alive(st, "proc-test") {
		t.Fatalf("stale pid of another program must exist but not be alive: %+v", st)
	}
	if g := samples[2]; !g.PidFileFound || g.Pid != 0 || proc.Alive(g, "proc-test") {
		t.Fatalf("garbage pid file: %+v", g)
	}
	if m := samples[3]; m.PidFileFound || proc.Alive(m, "proc-test") {
		t.Fatalf("missing pid file: %+v", m)
	}
}

func TestProbeMeasuresCurrentCPU(t *testing.T) {
	dir := t.TempDir()
	burn := exec.Command("sh", "-c", "while :; do :; done")
	must(t, burn.Start())
	t.Cleanup(func() { _ = burn.Process.Signal(syscall.SIGKILL); _ = burn.Wait() })
	pidFile := filepath.Join(dir, "burn.pid")
	must(t, os.WriteFile(pidFile, []byte(strconv.Itoa(burn.Process.Pid)), 0o644))
	// A busy loop uses one whole core: about 100/ncpu percent of the host.
	// A machine busy with other work lends it less, so the best of a few
	// windows counts.
	var got float64
	for try := 0; try < 5 && got < 10; try++ {
		_, samples, err := ParseProbe(runLocal(t, ProbeScript([]string{pidFile}, 300*time.Millisecond)), 1)
		if err != nil {
			t.Fatal(err)
		}
		got = max(got, proc.CPUPercent(samples[0]))
	}
	if got < 10 {
		t.Fatalf("cpu%% of a busy loop = %.1f, want a large share of the host", got)
	}
}

// TestProbeCutsALongCommandLineAt4KiB: a command line of any length reads
// back as its first 4096 bytes, argv intact up to the cut.
func TestProbeCutsALongCommandLineAt4KiB(t *testing.T) {
	for _, n := range []int{10, 4096, 6000} {
		long := strings.Repeat("x", n)
		p := exec.Command("sh", "-c", "sleep 300; :", long)
		must(t, p.Start())
		pidFile := filepath.Join(t.TempDir(), "long.pid")
		must(t, os.WriteFile(pidFile, []byte(strconv.Itoa(p.Process.Pid)), 0o644))
		_, samples, err := ParseProbe(runLocal(t, ProbeScript([]string{pidFile}, 0)), 1)
		_ = p.Process.Signal(syscall.SIGKILL)
		_ = p.Wait()
		if err != nil {
			t.Fatal(err)
		}
		full := "sh -c sleep 300; : " + long
		want := full[:min(len(full), 4096)]
		if s := samples[0]; s.Cmdline != want || s.Argv0 != "sh" || s.Argv1 != "-c" {
			t.Fatalf("an argument of %d bytes: cmdline of %d bytes %.40q..., argv %q %q; want %d bytes", n, len(s.Cmdline), s.Cmdline, s.Argv0, s.Argv1, len(want))
		}
	}
}

func TestParseProbeRejectsNoise(t *testing.T) {
	if _, _, err := ParseProbe("garbage\n", 1); err == nil {
		t.Fatal("output without a host line must be an error")
	}
	host, samples, err := ParseProbe("H\t2\t100\t1000\t5\t6\tUTC+0000\t4096\nP\t7\t1\t1\t\nP\tx\nQ\nC\t0\n", 1)
	if err != nil || host.CPUs != 2 || len(samples) != 1 || samples[0].Exists {
		t.Fatalf("noise must be ignored: %v %+v %+v", err, host, samples)
	}
}

func FuzzParseProbe(f *testing.F) {
	f.Add("H\t2\t100\t1000\t5\t6\tUTC+0000\t4096\nP\t0\t1\t42\tS 1 1 1 1 1 1 1 1 1 1 5 6 0 0 20 0 3 0 777 1000 25\nX\t0\t/bin/x\nC\t0\tx\ta\t\nQ\t0\t9\t9\nT\t1\t2\n", 2,
		42, uint64(5), uint64(6), 3, uint64(777), uint64(25), uint64(4096), "/bin/sh", "./svc")
	// Two pid files sampled twice over one window.
	f.Add("H\t2\t100\t1000\t5\t6\tUTC+0000\t4096\nP\t0\t1\t42\tS 1 1 1 1 1 1 1 1 1 1 5 6 0 0 20 0 3 0 777 1000 25\nP\t1\t1\t43\tR 1 1 1 1 1 1 1 1 1 1 7 8 0 0 20 0 1 0 778 1000 26\nQ\t0\t9\t9\nQ\t1\t9\t10\nT\t100\t300\n", 2,
		1, uint64(0), uint64(0), 1, uint64(1), uint64(1), uint64(65536), "/usr/bin/python3", "-m")
	f.Fuzz(func(t *testing.T, out string, n int, pid int, utime, stime uint64, threads int, start, rss, page uint64, argv0, argv1 string) {
		if n < 0 || n > 64 {
			return
		}
		_, samples, err := ParseProbe(out, n)
		if err != nil {
			return
		}
		if len(samples) != n {
			t.Fatalf("%d samples for n=%d", len(samples), n)
		}
		mentioned := probeIndices(out)
		var hostDelta uint64
		for i, s := range samples {
			// A pid file the output says nothing of has the zero sample.
			if !mentioned[i] && s != (proc.Sample{}) {
				t.Fatalf("sample %d never mentioned, yet %+v", i, s)
			}
			if s.Exists && (s.State == "" || strings.ContainsAny(s.State, " \t")) {
				t.Fatalf("sample %d exists in state %q", i, s.State)
			}
			// Cmdline is argv joined by spaces: it begins with argv0 and argv1.
			if s.Argv1 != "" && !strings.HasPrefix(s.Cmdline, s.Argv0+" "+s.Argv1) || !strings.HasPrefix(s.Cmdline, s.Argv0) {
				t.Fatalf("sample %d: cmdline %q with argv %q %q", i, s.Cmdline, s.Argv0, s.Argv1)
			}
			// Both deltas come from the same two samples: both or neither,
			// and the host's is one window for every pid file.
			if (s.CPUTicksDelta != 0) && s.HostTicksDelta == 0 {
				t.Fatalf("sample %d: cpu delta %d over no host ticks", i, s.CPUTicksDelta)
			}
			if s.HostTicksDelta != 0 {
				if hostDelta != 0 && s.HostTicksDelta != hostDelta {
					t.Fatalf("host ticks %d and %d in one probe", hostDelta, s.HostTicksDelta)
				}
				hostDelta = s.HostTicksDelta
			}
		}

		// What a host prints of a live process reads back as it was.
		if page == 0 || rss > ^uint64(0)/page || strings.ContainsAny(argv0+argv1, "\t\r\n") || argv0 == "" || argv1 == "" {
			return
		}
		stat := fmt.Sprintf("S 1 1 1 1 1 1 1 1 1 1 %d %d 0 0 20 0 %d 0 %d 1000 %d", utime, stime, threads, start, rss)
		gen := fmt.Sprintf("H\t2\t100\t1000\t5\t6\tUTC+0000\t%d\nP\t0\t1\t%d\t%s\nC\t0\t%s\t%s\t\n", page, pid, stat, argv0, argv1)
		_, samples, err = ParseProbe(gen, 1)
		want := proc.Sample{PidFileFound: true, Pid: pid, Exists: true, State: "S", UTime: utime, STime: stime, Threads: threads,
			StartTicks: start, RSSBytes: rss * page, Argv0: argv0, Argv1: argv1, Cmdline: argv0 + " " + argv1}
		if err != nil || samples[0] != want {
			t.Fatalf("probe %q read as %+v (%v), want %+v", gen, samples, err, want)
		}
	})
}

// probeIndices lists the pid-file indices the per-pid-file lines (P, X,
// C, Q) of a probe's output name.
func probeIndices(out string) map[int]bool {
	m := map[int]bool{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSuffix(line, "\r"), "\t")
		if len(f) < 2 || !strings.Contains("PXCQ", f[0]) || len(f[0]) != 1 {
			continue
		}
		if i, err := strconv.Atoi(strings.TrimSpace(f[1])); err == nil {
			m[i] = true
		}
	}
	return m
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// oneHost is Activities over r for an inventory of one host, 10.0.0.1.
func oneHost(t *testing.T, r transport.Runner) *Activities {
	t.Helper()
	inv, err := inventory.New("", inventory.Host{}, nil, []inventory.Host{{IP: "10.0.0.1"}})
	must(t, err)
	return &Activities{Inventory: inv, Runner: r}
}
