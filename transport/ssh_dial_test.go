package transport

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/drover-sh/drover/inventory"
)

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

// silentHosts are listeners that accept connections and never speak, so a
// dial to them stays in flight until released.
type silentHosts struct {
	mu       sync.Mutex
	open     map[net.Conn]bool
	max      int  // most connections open at once
	releases bool // close connections as they come
}

func newSilentHosts(t *testing.T, n int) (*silentHosts, []inventory.Host) {
	t.Helper()
	sh := &silentHosts{open: map[net.Conn]bool{}}
	var hosts []inventory.Host
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				sh.mu.Lock()
				sh.open[c] = true
				sh.max = max(sh.max, len(sh.open))
				if sh.releases {
					delete(sh.open, c)
					c.Close()
				}
				sh.mu.Unlock()
			}
		}()
		hosts = append(hosts, inventory.Host{IP: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port, User: "root", PasswordEnv: "DROVER_TEST_PW"})
	}
	t.Cleanup(sh.release)
	return sh, hosts
}

func (sh *silentHosts) count() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.open)
}

// release closes every connection, and those still to come.
func (sh *silentHosts) release() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.releases = true
	for c := range sh.open {
		c.Close()
		delete(sh.open, c)
	}
}

// TestDialsCapped connects to more hosts at once than MaxDials allows:
// the rest wait for a slot instead of opening a socket.
func TestDialsCapped(t *testing.T) {
	t.Setenv("DROVER_TEST_PW", "unused")
	const n, limit = 5, 2
	sh, hosts := newSilentHosts(t, n)
	s := newSSH(t, emptyKnownHosts(t), func(o *SSHOptions) {
		o.MaxDials = limit
		o.DialTimeout = time.Minute // only the test ends these dials
	})
	errs := make(chan error, n)
	for _, h := range hosts {
		go func() { errs <- s.Connect(context.Background(), h) }()
	}
	// Every dial is accounted for once it has either reached its host or
	// queued for a slot; only then are the numbers final.
	deadline := time.Now().Add(10 * time.Second)
	for sh.count()+int(s.dialsQueued.Load()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("dials: %d at the hosts, %d queued; want %d in all", sh.count(), s.dialsQueued.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, queued := sh.count(), s.dialsQueued.Load(); got != limit || queued != n-limit {
		t.Fatalf("%d dials at the hosts and %d queued, want %d and %d", got, queued, limit, n-limit)
	}

	// As the hosts hang up, the queued dials go ahead, never above the cap.
	sh.release()
	for range hosts {
		if err := <-errs; KindOf(err) != KindUnreachable {
			t.Errorf("a host that hung up: %v", err)
		}
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.max > limit {
		t.Errorf("%d dials in flight at once, cap %d", sh.max, limit)
	}
}

// TestHandshakeTimeoutIsTriedAgain: a host whose first connection is
// accepted but never answered (an sshd too busy to handshake in time) is
// dialled once more, and the op runs; a host that never answers still
// fails, after its second try.
func TestHandshakeTimeoutIsTriedAgain(t *testing.T) {
	_, hosts := newBed(t, 1)
	real := hosts[0].DialAddress()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var held []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if accepted.Add(1) == 1 {
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
				continue
			}
			go proxy(c, real)
		}
	}()
	h := hosts[0]
	h.Address, h.Port = "127.0.0.1", l.Addr().(*net.TCPAddr).Port
	s := newSSH(t, emptyKnownHosts(t), func(o *SSHOptions) {
		o.DialTimeout = time.Second
		o.TrustOnFirstUse = true
	})
	res, err := s.Run(context.Background(), h, Command{Script: "echo hi"})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "hi" {
		t.Fatalf("run after a handshake that timed out: %q %v", res.Stdout, err)
	}
	if st := s.Stats(); accepted.Load() != 2 || st.Redials != 1 || st.Handshakes != 1 {
		t.Fatalf("%d connections, %+v; want 2 connections, 1 redial, 1 handshake", accepted.Load(), st)
	}

	t.Setenv("DROVER_TEST_PW", "unused")
	sh, silent := newSilentHosts(t, 1)
	s = newSSH(t, emptyKnownHosts(t), func(o *SSHOptions) { o.DialTimeout = 200 * time.Millisecond })
	_, err = s.Run(context.Background(), silent[0], Command{Script: "true"})
	wantKind(t, err, KindUnreachable)
	if !strings.Contains(err.Error(), "handshake timed out after 200ms") || s.Stats().Redials != 1 {
		t.Fatalf("a silent host: %v, %+v", err, s.Stats())
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.max != 2 {
		t.Fatalf("a silent host took %d connections, want two tries", sh.max)
	}
}

// proxy joins c to a new connection to addr until either side ends.
func proxy(c net.Conn, addr string) {
	defer c.Close()
	up, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(up, c) }()
	_, _ = io.Copy(c, up)
}
