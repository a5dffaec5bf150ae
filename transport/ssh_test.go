package transport

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

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
	if got := string(run(t, s, h, Command{Script: script}).Stdout); got != "it's|sub|bq\n* sh\n" {
		t.Errorf("tricky script: %q", got)
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

func TestConcurrentRunsShareOneHandshake(t *testing.T) {
	bed, hosts := newBed(t, 3)
	s := newSSH(t, bed.KnownHostsPath)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Run(context.Background(), hosts[0], Command{Script: "echo " + strconv.Itoa(i) + "; sleep 0.05"})
			if err == nil && string(res.Stdout) != strconv.Itoa(i)+"\n" {
				err = fmt.Errorf("run %d got %q", i, res.Stdout)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := s.Stats(); st.Handshakes != 1 || st.Execs != n {
		t.Fatalf("after %d concurrent runs: %+v, want 1 handshake", n, st)
	}

	// Later calls, and other hosts, reuse or add one connection each.
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		for _, h := range hosts {
			for j := 0; j < 5; j++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := s.Run(context.Background(), h, Command{Script: "true"}); err != nil {
						t.Error(err)
					}
				}()
			}
		}
		wg.Wait()
	}
	if st := s.Stats(); st.Handshakes != 3 {
		t.Fatalf("three hosts: %+v, want 3 handshakes", st)
	}
}

func TestPoolCapClosesLeastRecentlyUsedIdle(t *testing.T) {
	bed, hosts := newBed(t, 3)
	s := newSSH(t, bed.KnownHostsPath, func(o *SSHOptions) { o.MaxPooled = 2 })
	ctx := context.Background()
	for _, h := range hosts[:2] {
		run(t, s, h, Command{Script: "true"})
	}
	run(t, s, hosts[0], Command{Script: "true"}) // hosts[1] is now the least recently used

	// A third host while hosts[0] runs a command: hosts[1] goes, hosts[0] stays.
	busy := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx, hosts[0], Command{Script: "sleep 1"})
		busy <- err
	}()
	time.Sleep(200 * time.Millisecond)
	run(t, s, hosts[2], Command{Script: "true"})
	if err := <-busy; err != nil {
		t.Fatalf("the busy connection was closed under its command: %v", err)
	}
	waitTrims := time.Now().Add(5 * time.Second)
	for s.Stats().Trims != 1 && time.Now().Before(waitTrims) {
		time.Sleep(20 * time.Millisecond)
	}
	before := s.Stats()
	if before.Trims != 1 || before.Handshakes != 3 {
		t.Fatalf("after a third host with a cap of 2: %+v, want 1 trim and 3 handshakes", before)
	}
	run(t, s, hosts[0], Command{Script: "true"})
	run(t, s, hosts[2], Command{Script: "true"})
	if st := s.Stats(); st.Handshakes != 3 {
		t.Fatalf("the kept connections were dialled again: %+v", st)
	}
	run(t, s, hosts[1], Command{Script: "true"})
	if st := s.Stats(); st.Handshakes != 4 {
		t.Fatalf("the trimmed host must dial again: %+v", st)
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

func TestKeepAliveEvictsFrozenConnection(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath, func(o *SSHOptions) { o.KeepAlive = 500 * time.Millisecond })
	run(t, s, hosts[0], Command{Script: "true"})
	if err := bed.Hosts[0].Pause(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Evictions == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	bed.Hosts[0].Resume()
	if st := s.Stats(); st.Evictions == 0 {
		t.Fatalf("frozen connection not evicted: %+v", st)
	}
	run(t, s, hosts[0], Command{Script: "true"})
	if st := s.Stats(); st.Handshakes < 2 {
		t.Errorf("want a fresh connection after eviction: %+v", st)
	}
}

func TestHostKeyChanged(t *testing.T) {
	bed, hosts := newBed(t, 1)
	if err := bed.Hosts[0].RotateHostKey(); err != nil {
		t.Fatal(err)
	}
	s := newSSH(t, bed.KnownHostsPath)
	_, err := s.Run(context.Background(), hosts[0], Command{Script: "touch /data/hostkey-ran"})
	wantKind(t, err, KindHostKey)
	if !strings.Contains(err.Error(), "host key changed") || !strings.Contains(err.Error(), "MITM") {
		t.Errorf("message: %v", err)
	}
	if out := hostExec(t, bed.Hosts[0], "ls /data"); strings.Contains(out, "hostkey-ran") {
		t.Fatal("a command ran on a host whose key changed")
	}
}

func TestHostKeyUnknown(t *testing.T) {
	bed, hosts := newBed(t, 2)
	// known_hosts that lists only the other host.
	data, err := os.ReadFile(bed.KnownHostsPath)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" && !strings.HasPrefix(line, hosts[0].IP+" ") {
			keep = append(keep, line)
		}
	}
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, []byte(strings.Join(keep, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newSSH(t, known)
	run(t, s, hosts[1], Command{Script: "true"})
	_, err = s.Run(context.Background(), hosts[0], Command{Script: "touch /data/unknown-ran"})
	wantKind(t, err, KindHostKey)
	if !strings.Contains(err.Error(), "host key unknown") || !strings.Contains(err.Error(), known) {
		t.Errorf("message: %v", err)
	}
	if out := hostExec(t, bed.Hosts[0], "ls /data"); strings.Contains(out, "unknown-ran") {
		t.Fatal("a command ran on an unknown host")
	}

	// Adding the host to known_hosts is picked up without a restart.
	if err := os.WriteFile(known, data, 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	os.Chtimes(known, future, future) // the rewrite may share the old mtime
	run(t, s, hosts[0], Command{Script: "true"})
}

func writeKey(t *testing.T) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "id_other")
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAuthFailures(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath)

	h := hosts[0]
	h.IdentityFile = writeKey(t)
	const secret = "s3cret-never-shown"
	t.Setenv("DROVER_TEST_PW", secret)
	h.PasswordEnv = "DROVER_TEST_PW"
	_, err := s.Run(context.Background(), h, Command{Script: "true"})
	wantKind(t, err, KindAuth)
	if !strings.Contains(err.Error(), "ssh: unable to authenticate") {
		t.Errorf("message: %v", err)
	}
	if strings.Contains(fmt.Sprintf("%+v %#v", err, err), secret) {
		t.Error("password leaked into the error")
	}

	h = hosts[0]
	h.IdentityFile = filepath.Join(t.TempDir(), "no-such-key")
	_, err = s.Run(context.Background(), h, Command{Script: "true"})
	wantKind(t, err, KindAuth)
	if !strings.Contains(err.Error(), h.IdentityFile) {
		t.Errorf("message should name the key file: %v", err)
	}

	h = hosts[0]
	h.IdentityFile = ""
	_, err = s.Run(context.Background(), h, Command{Script: "true"})
	wantKind(t, err, KindAuth)
	if st := s.Stats(); st.Handshakes != 0 {
		t.Errorf("failed logins counted as handshakes: %+v", st)
	}
}

func TestAgentAuth(t *testing.T) {
	bed, hosts := newBed(t, 1)
	keyPEM, err := os.ReadFile(bed.ClientKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ssh.ParseRawPrivateKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: raw}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); agent.ServeAgent(keyring, c) }()
		}
	}()
	s := newSSH(t, bed.KnownHostsPath, func(o *SSHOptions) { o.AgentSocket = sock })
	h := hosts[0]
	h.IdentityFile = ""
	if got := string(run(t, s, h, Command{Script: "id -un"}).Stdout); got != "root\n" {
		t.Errorf("agent login: %q", got)
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
		// Checked right away: the kill is confirmed before Run returns.
		for _, pat := range []string{"[d]rover-marker-" + tok, "^sleep 300\\." + tok + "$", "^sleep 302\\." + tok + "$"} {
			if out := hostExec(t, th, "pgrep -f "+ShellQuote(pat)+" || true"); out != "" {
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

// sessionChildren are the listener's children: one per client connection.
func sessionChildren(t *testing.T, listener int) []int {
	t.Helper()
	return liveProcs(func(f []string) bool { return len(f) > 1 && f[1] == strconv.Itoa(listener) })
}

func dropConnections(t *testing.T, h *testbed.Host) {
	t.Helper()
	kids := sessionChildren(t, h.Pid())
	if len(kids) == 0 {
		t.Error("no sshd connection processes found")
	}
	for _, pid := range kids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

func TestConnectionDropReconnects(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath)
	h, th := hosts[0], bed.Hosts[0]
	run(t, s, h, Command{Script: "true"})

	dropConnections(t, th)
	if got := string(run(t, s, h, Command{Script: "echo again"}).Stdout); got != "again\n" {
		t.Fatalf("after drop: %q", got)
	}
	if st := s.Stats(); st.Handshakes != 2 {
		t.Errorf("stats %+v, want a second handshake", st)
	}

	// A connection that died before the command was sent is retried on a
	// fresh one: runOn reports it as fresh, and Run succeeds.
	c, err := s.get(context.Background(), keyFor(h))
	if err != nil {
		t.Fatal(err)
	}
	c.client.Close()
	_, err, fresh := s.runOn(context.Background(), c, h.User, Command{Script: "true"})
	if !fresh || KindOf(err) != KindUnreachable {
		t.Errorf("dead connection: fresh=%v err=%v", fresh, err)
	}
	run(t, s, h, Command{Script: "true"})

	// A connection lost mid-command is reported, never re-run.
	tok := token(t)
	go func() {
		if waitRunning(t, th, "^sleep 30\\."+tok+"$") {
			dropConnections(t, th)
		}
	}()
	_, err = s.Run(context.Background(), h, Command{Script: "echo x >> /data/runs-" + tok + "; sleep 30." + tok})
	wantKind(t, err, KindUnreachable)
	if out := hostExec(t, th, "cat /data/runs-"+tok); out != "x" {
		t.Errorf("command ran %q times", out)
	}
	run(t, s, h, Command{Script: "true"})
}

func TestBastion(t *testing.T) {
	bed, hosts := newBed(t, 2)
	a, b := hosts[0], hosts[1]
	inv, err := inventory.New(bed.KnownHostsPath,
		inventory.Host{User: "root", IdentityFile: bed.ClientKeyPath},
		map[int]inventory.Bastion{7: {User: "root", Address: a.DialAddress(), IdentityFile: bed.ClientKeyPath}},
		[]inventory.Host{{IP: b.IP, CloudID: 7}})
	if err != nil {
		t.Fatal(err)
	}
	viaA := inv.Hosts()[0]
	if viaA.Bastion == nil {
		t.Fatal("inventory did not attach the bastion")
	}

	s := newSSH(t, bed.KnownHostsPath)
	tok := token(t)
	run(t, s, viaA, Command{Script: "echo " + tok + " > /data/bastion-proof"})
	if got := hostExec(t, bed.Hosts[1], "cat /data/bastion-proof"); got != tok {
		t.Errorf("host B /data: %q", got)
	}
	if got := hostExec(t, bed.Hosts[0], "cat /data/bastion-proof 2>/dev/null || true"); got != "" {
		t.Errorf("command ran on the bastion: %q", got)
	}
	if st := s.Stats(); st.Handshakes != 2 {
		t.Errorf("stats %+v: want bastion + target", st)
	}

	// With the bastion down, B is unreachable although its sshd is up.
	if err := bed.Hosts[0].Stop(); err != nil {
		t.Fatal(err)
	}
	s2 := newSSH(t, bed.KnownHostsPath)
	_, err = s2.Run(context.Background(), viaA, Command{Script: "true", Timeout: 5 * time.Second})
	wantKind(t, err, KindUnreachable)
	if !strings.Contains(err.Error(), "bastion root@"+a.DialAddress()) {
		t.Errorf("message should name the bastion: %v", err)
	}
	run(t, s2, b, Command{Script: "true"})
}

func TestCloseFailsLaterRuns(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath)
	run(t, s, hosts[0], Command{Script: "true"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Run(context.Background(), hosts[0], Command{Script: "true"})
	if !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
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

func TestEncryptedIdentityFile(t *testing.T) {
	bed, hosts := newBed(t, 1)
	const pass = "pass-phrase-never-shown"
	encrypted := filepath.Join(t.TempDir(), "id_encrypted")
	if err := bed.AddEncryptedKey(encrypted, pass); err != nil {
		t.Fatal(err)
	}
	s := newSSH(t, bed.KnownHostsPath)
	h := hosts[0]
	h.IdentityFile = encrypted

	_, err := s.Run(context.Background(), h, Command{Script: "true"})
	wantKind(t, err, KindAuth)
	if !strings.Contains(err.Error(), "passphrase_env") {
		t.Errorf("without a passphrase: %v", err)
	}
	t.Setenv("DROVER_TEST_PASSPHRASE", "wrong-phrase")
	h.PassphraseEnv = "DROVER_TEST_PASSPHRASE"
	_, err = s.Run(context.Background(), h, Command{Script: "true"})
	wantKind(t, err, KindAuth)
	if !strings.Contains(err.Error(), "DROVER_TEST_PASSPHRASE") || strings.Contains(err.Error(), "wrong-phrase") {
		t.Errorf("wrong passphrase: %v", err)
	}
	t.Setenv("DROVER_TEST_PASSPHRASE", pass)
	if out := run(t, s, h, Command{Script: "echo ok"}); strings.TrimSpace(string(out.Stdout)) != "ok" {
		t.Fatalf("with the passphrase: %q", out.Stdout)
	}
}

func TestTrustOnFirstUse(t *testing.T) {
	bed, hosts := newBed(t, 1)
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, []byte("# no hosts yet"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Off by default: the unknown host is refused and nothing is recorded.
	_, err := newSSH(t, known).Run(context.Background(), hosts[0], Command{Script: "touch /data/tofu-off-ran"})
	wantKind(t, err, KindHostKey)
	if b, _ := os.ReadFile(known); string(b) != "# no hosts yet" {
		t.Fatalf("known_hosts changed with trust on first use off: %q", b)
	}

	var trusted []string
	s := newSSH(t, known, func(o *SSHOptions) {
		o.TrustOnFirstUse = true
		o.OnTrust = func(addr, fp string) { trusted = append(trusted, addr+" "+fp) }
	})
	run(t, s, hosts[0], Command{Script: "true"})
	want := ssh.FingerprintSHA256(bed.Hosts[0].PublicKey())
	if len(trusted) != 1 || !strings.HasSuffix(trusted[0], want) {
		t.Fatalf("trusted %v, want one with %s", trusted, want)
	}
	// The recorded key is the host's, read back by a transport without TOFU.
	run(t, newSSH(t, known), hosts[0], Command{Script: "true"})
	if b, _ := os.ReadFile(known); !strings.HasPrefix(string(b), "# no hosts yet\n") || strings.Count(string(b), "\n") != 2 {
		t.Fatalf("known_hosts: %q", b)
	}

	// A changed key is never trusted, and no command is sent.
	if err := bed.Hosts[0].RotateHostKey(); err != nil {
		t.Fatal(err)
	}
	s2 := newSSH(t, known, func(o *SSHOptions) { o.TrustOnFirstUse = true })
	_, err = s2.Run(context.Background(), hosts[0], Command{Script: "touch /data/tofu-changed-ran"})
	wantKind(t, err, KindHostKey)
	if !strings.Contains(err.Error(), "host key changed") {
		t.Errorf("message: %v", err)
	}
	if out := hostExec(t, bed.Hosts[0], "ls /data"); strings.Contains(out, "ran") {
		t.Fatalf("a command ran on a refused host: %s", out)
	}
}
