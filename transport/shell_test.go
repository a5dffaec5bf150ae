package transport

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestShellQuote(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "''"},
		{"abc", "abc"},
		{"drover-app", "drover-app"},
		{"/usr/bin/x_y.z", "/usr/bin/x_y.z"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"'", `''\'''`},
		{"''", `''\'''\'''`},
		{"line1\nline2", "'line1\nline2'"},
		{"$(rm -rf /)", "'$(rm -rf /)'"},
		{"`id`", "'`id`'"},
		{"$HOME", "'$HOME'"},
		{"*.log", "'*.log'"},
		{"a?b[c]", "'a?b[c]'"},
		{"x=1", "'x=1'"},
		{"a;b|c&d>e<f", "'a;b|c&d>e<f'"},
		{`back\slash "dq"`, `'back\slash "dq"'`},
		{"~root", "'~root'"},
		{"tab\there", "'tab\there'"},
		{"#comment", "'#comment'"},
		{"ünï", "'ünï'"},
	}
	for _, c := range cases {
		if got := ShellQuote(c.in); got != c.want {
			t.Errorf("ShellQuote(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestShellQuoteRoundTrip has a real sh read each quoted word back.
func TestShellQuoteRoundTrip(t *testing.T) {
	words := []string{
		"", " ", "plain", "it's", "'", "\"", "\\", "\n", "a\nb\n", "$(touch /tmp/never)", "`touch /tmp/never`",
		"${IFS}", "*", "?", "[a]", "!", "&&", ";", "x=1", "~", "-n", "--", "\t", "é", "'\\''",
	}
	for _, w := range words {
		out, err := exec.Command("sh", "-c", "printf %s "+ShellQuote(w)).Output()
		if err != nil {
			t.Fatalf("sh for %q: %v", w, err)
		}
		if string(out) != w {
			t.Errorf("round trip of %q gave %q", w, out)
		}
	}
}

func TestRemoteCommand(t *testing.T) {
	if got := remoteCommand("root", Command{Script: "id -un"}, 0); strings.HasPrefix(got, "sudo") || !strings.HasPrefix(got, "sh -c ") {
		t.Errorf("no account: %q", got)
	}
	if got := remoteCommand("root", Command{Script: "id -un", Account: "root"}, 0); strings.HasPrefix(got, "sudo") {
		t.Errorf("account == login user must not sudo: %q", got)
	}
	got := remoteCommand("root", Command{Script: "id -un", Account: "app; rm -rf /"}, 0)
	if !strings.HasPrefix(got, "sudo -n -u 'app; rm -rf /' -- sh -c ") {
		t.Errorf("sudo prefix: %q", got)
	}
	if got := killCommand("root", Command{Account: "app"}, 42); strings.Contains(got, "sudo") || !strings.HasSuffix(got, " drover 42") {
		t.Errorf("root kills without sudo: %q", got)
	}
	if got := killCommand("deploy", Command{Account: "app"}, 42); !strings.HasPrefix(got, "sudo -n -u app -- ") {
		t.Errorf("non-root login kills as the account: %q", got)
	}
}

// TestWrapperLocally runs the exact exec request through a local sh in a
// fresh session, as sshd would, and checks output, exit code and marker.
func TestWrapperLocally(t *testing.T) {
	script := "printf '%s\\n' \"it's $((1+2))\" `echo bq`; echo err >&2; echo '*'; exit 3"
	c := exec.Command("setsid", "sh", "-c", remoteCommand("", Command{Script: script}, 0))
	var stdout bytes.Buffer
	stderr := newMarkerStderr()
	c.Stdout, c.Stderr = &stdout, stderr
	err := c.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit: %v", err)
	}
	if got, want := stdout.String(), "it's 3\nbq\n*\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got := string(stderr.Bytes()); got != "err\n" {
		t.Errorf("stderr %q, want marker stripped", got)
	}
	seen, pgid := stderr.started()
	if !seen || pgid != c.Process.Pid {
		t.Errorf("marker seen=%v pgid=%d, want the session leader %d", seen, pgid, c.Process.Pid)
	}
}

// TestWrapperNotSessionLeader: outside a session of its own the wrapper must
// not report a group, or a cancel could kill someone else's processes.
func TestWrapperNotSessionLeader(t *testing.T) {
	c := exec.Command("sh", "-c", remoteCommand("", Command{Script: "true"}, 0))
	// A group of its own inside the test's session: pgid != sid.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := newMarkerStderr()
	c.Stderr = stderr
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if seen, pgid := stderr.started(); !seen || pgid != 0 {
		t.Errorf("seen=%v pgid=%d, want seen and no group", seen, pgid)
	}
}

func TestMarkerStderr(t *testing.T) {
	marker := startMarker + " 1234\n"
	cases := []struct {
		name   string
		chunks []string
		seen   bool
		pgid   int
		want   string
	}{
		{"alone", []string{marker}, true, 1234, ""},
		{"then output", []string{marker + "boom\n"}, true, 1234, "boom\n"},
		{"sudo warning first", []string{"sudo: unable to resolve host x\n" + marker + "e\n"}, true, 1234, "sudo: unable to resolve host x\ne\n"},
		{"split everywhere", strings.Split("pre\n"+marker+"post", ""), true, 1234, "pre\npost"},
		{"no group", []string{startMarker + " \nx"}, true, 0, "x"},
		{"refused", []string{"sudo: unknown user nobody2\n"}, false, 0, "sudo: unknown user nobody2\n"},
		{"not at line start", []string{"x" + marker}, false, 0, "x" + marker},
		{"second marker is output", []string{marker, marker}, true, 1234, marker},
	}
	for _, c := range cases {
		m := newMarkerStderr()
		for _, ch := range c.chunks {
			if n, err := m.Write([]byte(ch)); n != len(ch) || err != nil {
				t.Fatalf("%s: Write = %d, %v", c.name, n, err)
			}
		}
		seen, pgid := m.started()
		if seen != c.seen || pgid != c.pgid || string(m.Bytes()) != c.want {
			t.Errorf("%s: seen=%v pgid=%d stderr=%q; want %v %d %q", c.name, seen, pgid, m.Bytes(), c.seen, c.pgid, c.want)
		}
	}
}

func TestMarkerStderrFlood(t *testing.T) {
	m := newMarkerStderr()
	chunk := bytes.Repeat([]byte("x"), 4096)
	for i := 0; i < 100; i++ {
		m.Write(chunk)
	}
	m.Write([]byte("\n" + startMarker + " 9\n"))
	if seen, _ := m.started(); seen {
		t.Error("a marker after a flood of stderr must not count")
	}
	if n := len(m.Bytes()); n != maxOutput {
		t.Errorf("kept %d bytes, want %d", n, maxOutput)
	}
}

func TestCapBuffer(t *testing.T) {
	b := &capBuffer{max: 10}
	for i := 0; i < 5; i++ {
		if n, err := b.Write([]byte(strconv.Itoa(i) + "abc")); n != 4 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if got := string(b.Bytes()); got != "0abc1abc2a" {
		t.Errorf("kept %q", got)
	}
}

func TestSummary(t *testing.T) {
	if got := summary(nil); got != "no message" {
		t.Errorf("empty: %q", got)
	}
	long := strings.Repeat("é", 600)
	if got := summary([]byte(long)); len(got) > 520 || !strings.HasSuffix(got, "...") {
		t.Errorf("long: %d bytes", len(got))
	}
}

// TestWrapperWatchdog checks the host-side deadline: the whole group is
// killed when it passes, a setsid child survives, and a script that ends in
// time keeps its exit code and leaves no watchdog behind.
func TestWrapperWatchdog(t *testing.T) {
	tok := strconv.Itoa(os.Getpid()) + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	c := exec.Command("setsid", "sh", "-c", remoteCommand("", Command{Script: "echo hi; exit 4"}, 30*time.Second))
	c.Stderr = newMarkerStderr()
	out, err := c.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 4 || string(out) != "hi\n" {
		t.Fatalf("in time: %v %q", err, out)
	}
	pgid := c.Process.Pid
	if pids := groupMembers(pgid); len(pids) > 0 {
		t.Errorf("watchdog left behind: %v", pids)
		syscall.Kill(-pgid, syscall.SIGKILL)
	}

	script := "setsid sleep 77." + tok + " </dev/null >/dev/null 2>&1 & sleep 30." + tok
	c = exec.Command("setsid", "sh", "-c", remoteCommand("", Command{Script: script}, time.Second))
	start := time.Now()
	err = c.Run()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("watchdog fired after %v", d)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("want the wrapper killed: %v", err)
	}
	if pids := groupMembers(c.Process.Pid); len(pids) > 0 {
		t.Errorf("group members survived: %v", pids)
	}
	out, _ = exec.Command("pgrep", "-f", "[s]leep 77."+tok).Output()
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("setsid child did not survive: %q", out)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

// groupMembers lists live processes in process group pgid, after giving
// exiting ones a moment to go.
// groupMembers waits, up to 10 s, for the group to empty: a killed process
// leaves asynchronously, later still on a loaded machine.
func groupMembers(pgid int) []int {
	var out []int
	for i := 0; i < 200; i++ {
		if out = scanGroup(pgid); len(out) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return out
}

func scanGroup(pgid int) []int {
	return liveProcs(func(f []string) bool { return len(f) > 2 && f[2] == strconv.Itoa(pgid) })
}

// liveProcs lists the pids of live (non-zombie) processes whose
// /proc/PID/stat fields after the command name satisfy match: f[0] is the
// state, f[1] the parent pid, f[2] the process group.
func liveProcs(match func(f []string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 0 && f[0] != "Z" && match(f) {
			out = append(out, pid)
		}
	}
	return out
}
