package transport

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

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

func newHostKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (h *hostKeys) parses() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.loads
}

// TestTrustOnFirstUseParsesOnce trusts many hosts, from many goroutines,
// as a first contact with a fleet does: known_hosts is parsed once, not
// once per host, and is parsed again only when someone else changes it.
func TestTrustOnFirstUseParsesOnce(t *testing.T) {
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, []byte("# no hosts yet"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := newHostKeys(known)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	addrs, keys := make([]string, n), make([]ssh.PublicKey, n)
	var wg sync.WaitGroup
	for i := range n {
		addrs[i], keys[i] = fmt.Sprintf("10.0.0.%d:22", i+1), newHostKey(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// As a dial does: ask, find the host unknown, trust it.
			check, _, err := h.callback(addrs[i])
			if err == nil {
				if err = check(addrs[i], &net.TCPAddr{}, keys[i]); unknownHost(err) {
					err = h.trust(addrs[i], &net.TCPAddr{}, keys[i])
				}
			}
			if err != nil {
				t.Errorf("%s: %v", addrs[i], err)
			}
		}()
	}
	// Two first contacts with one host race: one key wins.
	racer := "10.0.1.1:2222"
	raceErrs := make(chan error, 2)
	// The keys are made here: newHostKey may end the test, which only the
	// test's own goroutine may do.
	for _, k := range []ssh.PublicKey{newHostKey(t), newHostKey(t)} {
		go func() { raceErrs <- h.trust(racer, &net.TCPAddr{}, k) }()
	}
	wg.Wait()
	if a, b := <-raceErrs, <-raceErrs; (a == nil) == (b == nil) {
		t.Errorf("two keys for one host: %v / %v, want exactly one trusted", a, b)
	}
	if got := h.parses(); got != 1 {
		t.Fatalf("known_hosts parsed %d times for %d new hosts, want once", got, n+1)
	}

	// Every trusted key is known, with its type offered, and a different
	// key for the host is a changed key at its line in the file.
	lines := strings.Split(readFile(t, known), "\n")
	for i, addr := range addrs {
		check, algos, err := h.callback(addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := check(addr, &net.TCPAddr{}, keys[i]); err != nil {
			t.Errorf("%s: trusted key refused: %v", addr, err)
		}
		if len(algos) != 1 || algos[0] != ssh.KeyAlgoED25519 {
			t.Errorf("%s: algorithms %v", addr, algos)
		}
		var ke *knownhosts.KeyError
		if err := check(addr, &net.TCPAddr{}, newHostKey(t)); !errors.As(err, &ke) || len(ke.Want) != 1 {
			t.Errorf("%s: another key: %v, want a changed key", addr, err)
		} else if line := lines[ke.Want[0].Line-1]; !strings.HasPrefix(line, knownhosts.Normalize(addr)+" ") {
			t.Errorf("%s: changed key reported at line %d, which is %q", addr, ke.Want[0].Line, line)
		}
	}
	if got := h.parses(); got != 1 {
		t.Fatalf("known_hosts parsed %d times, want once", got)
	}

	// The file holds them all, for a worker that starts afresh.
	fresh, err := newHostKeys(known)
	if err != nil {
		t.Fatal(err)
	}
	for i, addr := range addrs {
		if err := fresh.check(addr, &net.TCPAddr{}, keys[i]); err != nil {
			t.Errorf("%s: not recorded in the file: %v", addr, err)
		}
	}

	// A line someone else adds is read, and the trusted keys stay known.
	other, otherKey := "10.0.2.1:22", newHostKey(t)
	f, err := os.OpenFile(known, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(knownhosts.Line([]string{knownhosts.Normalize(other)}, otherKey) + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		addr string
		key  ssh.PublicKey
	}{{other, otherKey}, {addrs[0], keys[0]}} {
		check, _, err := h.callback(c.addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := check(c.addr, &net.TCPAddr{}, c.key); err != nil {
			t.Errorf("%s after an outside change: %v", c.addr, err)
		}
	}
	if got := h.parses(); got != 2 {
		t.Fatalf("known_hosts parsed %d times, want twice: once more for the outside change", got)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
