package transport

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/inventory"
)

// noAgent keeps a developer's own ssh-agent out of the tests.
const noAgent = "/nonexistent/agent.sock"

func newBed(t *testing.T, n int) (*testbed.Bed, []inventory.Host) {
	t.Helper()
	bed := testbed.New(t, testbed.Options{Hosts: n})
	inv, err := inventory.Load(bed.InventoryPath)
	if err != nil {
		t.Fatal(err)
	}
	return bed, inv.Hosts()
}

func newSSH(t *testing.T, knownHosts string, opts ...func(*SSHOptions)) *SSH {
	t.Helper()
	o := SSHOptions{KnownHostsPath: knownHosts, AgentSocket: noAgent}
	for _, f := range opts {
		f(&o)
	}
	s, err := NewSSH(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func run(t *testing.T, s *SSH, h inventory.Host, cmd Command) Result {
	t.Helper()
	res, err := s.Run(context.Background(), h, cmd)
	if err != nil {
		t.Fatalf("Run(%q): %v (stderr %q)", cmd.Script, err, res.Stderr)
	}
	return res
}

func wantKind(t *testing.T, err error, want Kind) {
	t.Helper()
	if got := KindOf(err); got != want {
		t.Fatalf("error kind %v, want %v: %v", got, want, err)
	}
}

func token(t *testing.T) string {
	return strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
}

// hostExec runs a script as root on the host, bypassing the transport.
func hostExec(t *testing.T, h *testbed.Host, script string) string {
	t.Helper()
	out, err := h.Exec(script)
	if err != nil {
		t.Fatalf("host exec %q: %v", script, err)
	}
	return strings.TrimSpace(out)
}

func TestNewSSHNeedsKnownHosts(t *testing.T) {
	if _, err := NewSSH(SSHOptions{}); err == nil {
		t.Error("NewSSH without KnownHostsPath must fail")
	}
	if _, err := NewSSH(SSHOptions{KnownHostsPath: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("NewSSH with a missing known_hosts must fail")
	}
}

func TestRunBasics(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath)
	h := hosts[0]

	if got := string(run(t, s, h, Command{Script: "id -un"}).Stdout); got != "root\n" {
		t.Errorf("id as login user: %q", got)
	}
	if got := string(run(t, s, h, Command{Script: "id -un", Account: "root"}).Stdout); got != "root\n" {
		t.Errorf("id with Account == User: %q", got)
	}
	res := run(t, s, h, Command{Script: "id -un; echo oops >&2; exit 3", Account: testbed.AppUser})
	if string(res.Stdout) != testbed.AppUser+"\n" || string(res.Stderr) != "oops\n" || res.ExitCode != 3 {
		t.Errorf("sudo run: stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}

	res = run(t, s, h, Command{Script: "echo out; echo err >&2; exit 3"})
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.ExitCode != 3 {
		t.Errorf("exit 3: stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}

	// The script reaches sh byte for byte: quotes, newlines, expansions.
	script := "x='it'\"'\"'s'\nprintf '%s|%s|%s\\n' \"$x\" \"$(echo sub)\" `echo bq`\necho '*' \"$0\""
	if got := string(run(t, s, h, Command{Script: script}).Stdout); got != "it's|sub|bq\n* drover\n" {
		t.Errorf("tricky script: %q", got)
	}
	// Arguments reach the script as they were, also through sudo, which
	// resets the environment.
	for _, account := range []string{"", testbed.AppUser} {
		if got := string(run(t, s, h, Command{Name: "echo", Script: echoArgs, Args: hardArgs, Account: account}).Stdout); got != wantEchoed(hardArgs) {
			t.Errorf("arguments as %q: got\n%s", account, got)
		}
	}

	res = run(t, s, h, Command{Script: "head -c 200000 /dev/zero; head -c 100000 /dev/zero >&2"})
	if len(res.Stdout) != maxOutput || len(res.Stderr) != maxOutput {
		t.Errorf("output caps: stdout %d stderr %d", len(res.Stdout), len(res.Stderr))
	}

	res, err := s.Run(context.Background(), h, Command{Script: "id -un", Account: "drover-nosuchuser"})
	wantKind(t, err, KindSudo)
	if !strings.Contains(err.Error(), "drover-nosuchuser") || !bytes.Contains(res.Stderr, []byte("sudo")) {
		t.Errorf("sudo refusal should carry sudo's message: %v / %q", err, res.Stderr)
	}

	if st := s.Stats(); st.Handshakes != 1 || st.PoolHits < 6 {
		t.Errorf("stats %+v: want one handshake reused by every later run", st)
	}
}

// TestBoundedCommandArmsNoWatchdog: a command with a deadline gets the
// host-side watchdog (a sleep in its session) unless it ends by itself.
func TestBoundedCommandArmsNoWatchdog(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Our own sleep has ended before pgrep looks for one in the session.
	const sleeps = "sleep 0.3; pgrep -s 0 -x sleep || true"
	for _, bounded := range []bool{false, true} {
		res, err := s.Run(ctx, hosts[0], Command{Script: sleeps, Bounded: bounded})
		if err != nil {
			t.Fatal(err)
		}
		if armed := strings.TrimSpace(string(res.Stdout)) != ""; armed == bounded {
			t.Errorf("bounded %v: sleeps in the session %q, want a watchdog's only when not bounded", bounded, res.Stdout)
		}
	}
}

// TestSudoRefusedForNonRoot logs in as the app account, which may not sudo.
func TestSudoRefusedForNonRoot(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath)
	h := hosts[0]
	h.User = testbed.AppUser
	if got := string(run(t, s, h, Command{Script: "id -un"}).Stdout); got != testbed.AppUser+"\n" {
		t.Fatalf("login as app: %q", got)
	}
	_, err := s.Run(context.Background(), h, Command{Script: "touch /data/should-not-exist", Account: "root"})
	wantKind(t, err, KindSudo)
	if out := hostExec(t, bed.Hosts[0], "ls /data"); strings.Contains(out, "should-not-exist") {
		t.Error("refused sudo ran the script")
	}
}

func TestStoppedHostUnreachable(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath)
	run(t, s, hosts[0], Command{Script: "true"})
	if err := bed.Hosts[0].Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := s.Run(context.Background(), hosts[0], Command{Script: "true", Timeout: 10 * time.Second})
	wantKind(t, err, KindUnreachable)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refused connection took %v", d)
	}
	if err := bed.Hosts[0].Start(); err != nil {
		t.Fatal(err)
	}
	run(t, s, hosts[0], Command{Script: "true"})
}

func TestPausedHost(t *testing.T) {
	bed, hosts := newBed(t, 1)
	h, th := hosts[0], bed.Hosts[0]
	const timeout = 2 * time.Second
	slack := 2 * time.Second

	t.Run("not yet connected", func(t *testing.T) {
		s := newSSH(t, bed.KnownHostsPath)
		if err := th.Pause(); err != nil {
			t.Fatal(err)
		}
		defer th.Resume()
		start := time.Now()
		_, err := s.Run(context.Background(), h, Command{Script: "true", Timeout: timeout})
		wantKind(t, err, KindUnreachable)
		if d := time.Since(start); d > timeout+slack {
			t.Errorf("returned after %v", d)
		}
	})

	t.Run("pooled connection", func(t *testing.T) {
		s := newSSH(t, bed.KnownHostsPath)
		run(t, s, h, Command{Script: "true"})
		if err := th.Pause(); err != nil {
			t.Fatal(err)
		}
		defer th.Resume()
		start := time.Now()
		_, err := s.Run(context.Background(), h, Command{Script: "touch /data/paused-ran", Timeout: timeout})
		wantKind(t, err, KindUnreachable) // the command never started
		if d := time.Since(start); d > timeout+slack {
			t.Errorf("returned after %v", d)
		}
	})

	t.Run("command running", func(t *testing.T) {
		s := newSSH(t, bed.KnownHostsPath)
		run(t, s, h, Command{Script: "true"}) // connect outside the timed part
		tok := token(t)
		paused := make(chan error, 1)
		go func() {
			if !waitRunning(t, th, "^sleep 300\\."+tok+"$") {
				paused <- errors.New("command never started")
				return
			}
			paused <- th.Pause()
		}()
		// Long enough for the command to start on a loaded machine.
		const timeout = 8 * time.Second
		start := time.Now()
		_, err := s.Run(context.Background(), h, Command{Script: "sleep 300." + tok, Timeout: timeout})
		d := time.Since(start)
		if perr := <-paused; perr != nil {
			t.Fatal(perr)
		}
		th.Resume()
		wantKind(t, err, KindTimeout)
		if d > timeout+killTimeout+slack {
			t.Errorf("returned after %v", d)
		}
		// Once the host runs again the queued kill takes effect.
		waitGone(t, th, "^sleep 300\\."+tok+"$")
	})
	if out := hostExec(t, th, "ls /data"); strings.Contains(out, "paused-ran") {
		t.Error("a command reported as not started ran after resume")
	}
}

// waitRunning polls until a process matches pattern on the machine, so
// tests act on a command that has really started even on a loaded machine.
// It may run in its own goroutine, so it reports failure with Errorf.
func waitRunning(t *testing.T, h *testbed.Host, pattern string) bool {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := h.Exec("pgrep -f " + ShellQuote(pattern) + " || true")
		if strings.TrimSpace(out) != "" {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("no process matching %q started", pattern)
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitGone polls until no process matches pattern on the machine.
func waitGone(t *testing.T, h *testbed.Host, pattern string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := h.Exec("pgrep -f " + ShellQuote(pattern) + " || true")
		if strings.TrimSpace(out) == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes matching %q still running: %s", pattern, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestTimeoutKillsRemoteCommand(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath)
	th := bed.Hosts[0]

	for _, account := range []string{"", testbed.AppUser} {
		tok := token(t)
		// A detached daemon outlives the command; the rest of the tree dies.
		script := ": drover-marker-" + tok + "\n" +
			"setsid sleep 301." + tok + " </dev/null >/dev/null 2>&1 &\n" +
			"sleep 302." + tok + " &\n" +
			"echo started; sleep 300." + tok
		// Cancel once the whole tree is up, however slow the machine is.
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			defer cancel()
			if waitRunning(t, th, "^sleep 300\\."+tok+"$") {
				waitRunning(t, th, "^sleep 301\\."+tok+"$")
			}
		}()
		res, err := s.Run(ctx, hosts[0], Command{Script: script, Account: account, Timeout: time.Minute})
		cancel()
		wantKind(t, err, KindTimeout)
		// Output still in flight when the command is killed may be lost.
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "killed") || (len(res.Stdout) > 0 && string(res.Stdout) != "started\n") {
			t.Errorf("account %q: err %v, partial stdout %q", account, err, res.Stdout)
		}
		// The kill is sent before Run returns; a loaded host may take a
		// moment to schedule the killed processes out, so each gets a few
		// seconds to be gone (a tree left alive stays for minutes).
		for _, pat := range []string{"[d]rover-marker-" + tok, "^sleep 300\\." + tok + "$", "^sleep 302\\." + tok + "$"} {
			out := ""
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if out = hostExec(t, th, "pgrep -f "+ShellQuote(pat)+" || true"); out == "" || time.Now().After(deadline) {
					break
				}
			}
			if out != "" {
				t.Errorf("account %q: %q still running: %s", account, pat, out)
			}
		}
		survivor := hostExec(t, th, "pgrep -f '^sleep 301\\."+tok+"$' || true")
		if survivor == "" {
			t.Errorf("account %q: the setsid-detached child was killed", account)
		} else {
			hostExec(t, th, "kill "+survivor)
		}
	}

	// A timeout stops the remote command the same way.
	tok := token(t)
	start := time.Now()
	_, err := s.Run(context.Background(), hosts[0], Command{Script: "sleep 300." + tok, Timeout: time.Second})
	wantKind(t, err, KindTimeout)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1s timeout") {
		t.Errorf("timeout error: %v", err)
	}
	if d := time.Since(start); d > time.Second+killTimeout+2*time.Second {
		t.Errorf("returned after %v", d)
	}
	waitGone(t, th, "^sleep 300\\."+tok+"$")

	// The connection is still good afterwards.
	run(t, s, hosts[0], Command{Script: "true"})
	if st := s.Stats(); st.Handshakes != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestManyTimeoutsAtOnce fills every session slot with commands that all
// time out together: each must still be killed, and later work must run.
func TestManyTimeoutsAtOnce(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath)
	th := bed.Hosts[0]
	run(t, s, hosts[0], Command{Script: "true"})
	tok := token(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Run(context.Background(), hosts[0], Command{Script: "sleep 300." + tok, Timeout: 3 * time.Second})
			if KindOf(err) != KindTimeout || !strings.Contains(err.Error(), "killed") {
				t.Errorf("run %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	waitGone(t, th, "^sleep 300\\."+tok+"$")
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Run(context.Background(), hosts[0], Command{Script: "true"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// TestQueuedCommandTimeoutRunsFromItsSession: a command queued behind the
// worker's own commands to a host still gets its whole timeout on the host,
// and one whose caller gives up while it waits says so and never runs.
func TestQueuedCommandTimeoutRunsFromItsSession(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath, func(o *SSHOptions) { o.MaxSessionsPerHost = 1 })
	h, th := hosts[0], bed.Hosts[0]
	run(t, s, h, Command{Script: "true"})
	tok := token(t)
	busy := make(chan error, 1)
	go func() {
		_, err := s.Run(context.Background(), h, Command{Script: "sleep 3." + tok})
		busy <- err
	}()
	if !waitRunning(t, th, "^sleep 3\\."+tok+"$") {
		t.Fatal("the first command never started")
	}
	// Queued for about 3 s behind the first, with 2 s of its own.
	res, err := s.Run(context.Background(), h, Command{Script: "echo queued", Timeout: 2 * time.Second})
	if err != nil || string(res.Stdout) != "queued\n" {
		t.Fatalf("queued command: %q, %v", res.Stdout, err)
	}
	if err := <-busy; err != nil {
		t.Fatal(err)
	}

	go func() {
		_, err := s.Run(context.Background(), h, Command{Script: "sleep 3." + tok})
		busy <- err
	}()
	if !waitRunning(t, th, "^sleep 3\\."+tok+"$") {
		t.Fatal("the third command never started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = s.Run(ctx, h, Command{Script: "touch /data/queued-ran." + tok, Timeout: time.Minute})
	wantKind(t, err, KindTimeout)
	if !strings.Contains(err.Error(), "no free session") || !strings.Contains(err.Error(), "not started") {
		t.Errorf("queued past its caller's deadline: %v", err)
	}
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	if out := hostExec(t, th, "ls /data"); strings.Contains(out, "queued-ran."+tok) {
		t.Error("a command reported as not started ran")
	}
}

// TestConcurrentMixedFailures runs completions, timeouts and a dropped
// connection at once, for the race detector and for error classification.
func TestConcurrentMixedFailures(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath)
	h, th := hosts[0], bed.Hosts[0]
	run(t, s, h, Command{Script: "true"})
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := Command{Script: "echo " + strconv.Itoa(i)}
			switch i % 4 {
			case 1:
				cmd = Command{Script: "sleep 5", Timeout: 300 * time.Millisecond}
			case 2:
				cmd.Account = testbed.AppUser
			case 3:
				cmd.Script = "sleep 0.3; exit 7"
			}
			res, err := s.Run(context.Background(), h, cmd)
			switch KindOf(err) {
			case 0:
				if err != nil {
					t.Errorf("unclassified error: %v", err)
				}
			case KindTimeout, KindUnreachable:
			default:
				t.Errorf("run %d: unexpected %v: %v (stderr %q)", i, KindOf(err), err, res.Stderr)
			}
		}()
		if i == 20 {
			dropConnections(t, th)
		}
	}
	wg.Wait()
	if got := string(run(t, s, h, Command{Script: "echo ok"}).Stdout); got != "ok\n" {
		t.Errorf("after the storm: %q", got)
	}
}
