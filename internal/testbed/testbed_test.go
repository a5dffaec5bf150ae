package testbed

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/drover-sh/drover/inventory"
)

// dial connects with the bed's client key, verifying the host key against
// the bed's known_hosts file, with every step bounded by timeout.
func dial(t *testing.T, b *Bed, h *Host, user string, timeout time.Duration) (*ssh.Client, error) {
	t.Helper()
	hostKeys, err := knownhosts.New(b.KnownHostsPath)
	if err != nil {
		t.Fatal(err)
	}
	return dialWith(h, &ssh.ClientConfig{
		User:            user,
		Auth:            []ssh.AuthMethod{publicKeyAuth(t, b)},
		HostKeyCallback: hostKeys,
		Timeout:         timeout,
	}, timeout)
}

func dialWith(h *Host, cfg *ssh.ClientConfig, timeout time.Duration) (*ssh.Client, error) {
	conn, err := net.DialTimeout("tcp", h.Addr(), timeout)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	c, chans, reqs, err := ssh.NewClientConn(conn, h.Addr(), cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

func run(t *testing.T, c *ssh.Client, cmd string) string {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	defer s.Close()
	out, err := s.Output(cmd)
	if err != nil {
		t.Fatalf("%q: %v", cmd, err)
	}
	return strings.TrimSpace(string(out))
}

func mustExec(t *testing.T, h *Host, script string) string {
	t.Helper()
	out, err := h.Exec(script)
	if err != nil {
		t.Fatalf("exec on %s: %v", h.IP, err)
	}
	return strings.TrimSpace(out)
}

func procAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && len(stat) > i+2 && stat[i+2] != 'Z'
}

func TestLoginAsRootAndApp(t *testing.T) {
	t.Parallel()
	// Under t.TempDir (mode 0700) drover-app cannot read authorized_keys
	// itself; logging in proves sshd's fallback serves it.
	b := New(t, Options{Hosts: 3, Dir: filepath.Join(t.TempDir(), "bed")})
	seen := map[string]bool{}
	for _, h := range b.Hosts {
		if seen[h.IP] || !strings.HasPrefix(h.IP, "127.0.") || h.IP == "127.0.0.1" || h.Port != 22 {
			t.Fatalf("bad address %s:%d", h.IP, h.Port)
		}
		seen[h.IP] = true
		for _, user := range []string{"root", AppUser} {
			c, err := dial(t, b, h, user, 10*time.Second)
			if err != nil {
				t.Fatalf("%s@%s: %v", user, h.IP, err)
			}
			if got := run(t, c, "id -un"); got != user {
				t.Errorf("%s@%s: id -un = %q", user, h.IP, got)
			}
			c.Close()
		}
	}
	log, err := os.ReadFile(b.Hosts[0].LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(log, []byte("Accepted publickey for "+AppUser)) {
		t.Errorf("sshd log lacks the drover-app login:\n%s", log)
	}
	// Root reaches drover-app non-interactively, as drover will.
	if got := mustExec(t, b.Hosts[0], "sudo -n -u "+AppUser+" id -un"); got != AppUser {
		t.Errorf("sudo -n -u %s id -un = %q", AppUser, got)
	}
}

func TestInventoryLoads(t *testing.T) {
	t.Parallel()
	b := New(t, Options{Hosts: 4, CloudOf: func(i int) int { return i / 2 }})
	inv, err := inventory.Load(b.InventoryPath)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(b.InventoryPath) || inv.KnownHosts() != b.KnownHostsPath {
		t.Errorf("paths: inventory %q, known_hosts %q want %q", b.InventoryPath, inv.KnownHosts(), b.KnownHostsPath)
	}
	hosts := inv.Hosts()
	if len(hosts) != 4 {
		t.Fatalf("got %d hosts", len(hosts))
	}
	for i, h := range hosts {
		bh := b.Hosts[i]
		if h.IP != bh.IP || h.Address != bh.IP || h.Port != 22 || h.User != "root" ||
			h.IdentityFile != b.ClientKeyPath || h.CloudID != i/2 || h.SupplierID != 0 ||
			h.Labels["idx"] != strconv.Itoa(i) || h.Transport != inventory.TransportSSH {
			t.Errorf("hosts[%d] = %+v", i, h)
		}
	}
	for sel, want := range map[string]int{"group:all-bed": 4, "group:web": 2, "group:db": 2, "label:idx=3": 1} {
		got, err := inv.Select(sel)
		if err != nil || len(got) != want {
			t.Errorf("Select(%q) = %d hosts, %v; want %d", sel, len(got), err, want)
		}
	}
	web, _ := inv.Select("group:web")
	if web[0].IP != b.Hosts[0].IP || web[1].IP != b.Hosts[2].IP {
		t.Errorf("group:web = %v", web)
	}
	// known_hosts holds one line per host, in OpenSSH's format.
	data, err := os.ReadFile(b.KnownHostsPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], b.Hosts[1].IP+" ssh-ed25519 ") {
		t.Errorf("known_hosts:\n%s", data)
	}
}

func TestDataIsPrivatePerHost(t *testing.T) {
	t.Parallel()
	b := New(t, Options{Hosts: 3})
	h0, h1 := b.Hosts[0], b.Hosts[1]
	mustExec(t, h0, "echo 4242 > /data/app.pid")
	if got := mustExec(t, h0, "cat /data/app.pid"); got != "4242" {
		t.Errorf("host 0 reads %q", got)
	}
	if got := mustExec(t, h1, "test -e /data/app.pid && echo present || echo absent"); got != "absent" {
		t.Errorf("host 1 sees host 0's file: %q", got)
	}
	if _, err := os.Stat(filepath.Join(h0.DataDir, "app.pid")); err != nil {
		t.Errorf("host-side DataDir: %v", err)
	}
	if _, err := os.Stat("/data/app.pid"); err == nil {
		t.Errorf("file leaked into the machine's /data")
	}
	// The same isolation holds for sessions over SSH.
	c, err := dial(t, b, h1, AppUser, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := run(t, c, "test -e /data/app.pid && echo present || echo absent"); got != "absent" {
		t.Errorf("ssh on host 1 sees host 0's file: %q", got)
	}
	if _, err := h0.Exec("exit 3"); err == nil {
		t.Errorf("failing script reported success")
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	b := New(t, Options{Hosts: 3})
	h0, h1 := b.Hosts[0], b.Hosts[1]

	existing, err := dial(t, b, h1, "root", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer existing.Close()

	if err := h1.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if c, err := dial(t, b, h1, "root", time.Second); err == nil {
		c.Close()
		t.Fatal("handshake with a paused host succeeded")
	} else if ne, ok := errors.AsType[net.Error](err); !ok || !ne.Timeout() {
		t.Fatalf("want a timeout, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("dial took %s", d)
	}
	// An established connection hangs too.
	res := make(chan error, 1)
	go func() {
		s, err := existing.NewSession()
		if err == nil {
			err = s.Run("true")
			s.Close()
		}
		res <- err
	}()
	select {
	case err := <-res:
		t.Fatalf("session on a paused host finished: %v", err)
	case <-time.After(time.Second):
	}
	// Other hosts are unaffected.
	c0, err := dial(t, b, h0, "root", 10*time.Second)
	if err != nil {
		t.Fatalf("host 0 while host 1 paused: %v", err)
	}
	run(t, c0, "true")
	c0.Close()

	if err := h1.Resume(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if err != nil {
			t.Errorf("session after resume: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("session still hung after resume")
	}
	c1, err := dial(t, b, h1, "root", 10*time.Second)
	if err != nil {
		t.Fatalf("after resume: %v", err)
	}
	if got := run(t, c1, "id -un"); got != "root" {
		t.Errorf("id -un = %q", got)
	}
	c1.Close()
}

func TestStopStart(t *testing.T) {
	t.Parallel()
	b := New(t, Options{Hosts: 3})
	h := b.Hosts[2]
	// A detached sample process on the host, as drover would start one.
	mustExec(t, h, "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > /data/sleep.pid")
	pid, err := strconv.Atoi(mustExec(t, h, "cat /data/sleep.pid"))
	if err != nil || !procAlive(pid) {
		t.Fatalf("sample process %d not running: %v", pid, err)
	}
	oldPid := h.Pid()

	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	if h.Pid() != 0 || procAlive(oldPid) {
		t.Errorf("sshd %d still alive after Stop", oldPid)
	}
	if procAlive(pid) {
		t.Errorf("sample process %d survived Stop", pid)
	}
	if _, err := dial(t, b, h, "root", 2*time.Second); err == nil {
		t.Error("dial to a stopped host succeeded")
	}
	if _, err := h.Exec("true"); err == nil {
		t.Error("Exec on a stopped host succeeded")
	}
	if err := h.Pause(); err == nil {
		t.Error("Pause on a stopped host succeeded")
	}

	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	// Same address and key: known_hosts still verifies.
	c, err := dial(t, b, h, "root", 10*time.Second)
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	defer c.Close()
	// /data survives like a disk; the process on it did not.
	if got := run(t, c, "cat /data/sleep.pid"); got != strconv.Itoa(pid) {
		t.Errorf("/data/sleep.pid = %q", got)
	}
	if procAlive(pid) {
		t.Errorf("sample process %d alive after restart", pid)
	}
}

func TestRotateHostKey(t *testing.T) {
	t.Parallel()
	b := New(t, Options{Hosts: 2})
	h := b.Hosts[1]
	old := h.PublicKey()
	mustExec(t, h, "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > /data/sleep.pid")
	if err := h.RotateHostKey(); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(old.Marshal(), h.PublicKey().Marshal()) {
		t.Fatal("key unchanged")
	}
	_, err := dial(t, b, h, "root", 10*time.Second)
	if ke, ok := errors.AsType[*knownhosts.KeyError](err); !ok || len(ke.Want) == 0 {
		t.Fatalf("want a changed-key error, got %v", err)
	}
	// Only the key changed: sshd itself and processes on the host carry on.
	var got ssh.PublicKey
	c, err := dialWith(h, &ssh.ClientConfig{
		User: "root",
		Auth: []ssh.AuthMethod{publicKeyAuth(t, b)},
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
			got = k
			return nil
		},
	}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !bytes.Equal(got.Marshal(), h.PublicKey().Marshal()) {
		t.Error("served key is not the rotated one")
	}
	if out := run(t, c, "kill -0 $(cat /data/sleep.pid) && echo alive"); out != "alive" {
		t.Errorf("sample process after rotation: %q", out)
	}
	// The other host still matches known_hosts.
	c0, err := dial(t, b, b.Hosts[0], "root", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c0.Close()
}

func publicKeyAuth(t *testing.T, b *Bed) ssh.AuthMethod {
	t.Helper()
	keyPEM, err := os.ReadFile(b.ClientKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return ssh.PublicKeys(signer)
}

func TestCloseLeavesNothing(t *testing.T) {
	t.Parallel()
	RequireRoot(t)
	b, err := Start(Options{Hosts: 3, Dir: filepath.Join(t.TempDir(), "bed")})
	if err != nil {
		t.Fatal(err)
	}
	var sample []int
	var configs []string
	for _, h := range b.Hosts {
		pid, err := strconv.Atoi(mustExec(t, h, "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!"))
		if err != nil {
			t.Fatal(err)
		}
		sample = append(sample, pid, h.Pid())
		configs = append(configs, h.configPath())
	}
	// A paused host must be cleaned up as well.
	if err := b.Hosts[1].Pause(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, pid := range sample {
		if procAlive(pid) {
			t.Errorf("process %d survived Close", pid)
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, cfg := range configs {
			if bytes.Contains(cmdline, []byte(cfg)) {
				t.Errorf("process %s still runs with %s", e.Name(), cfg)
			}
		}
	}
	// The address claims are released (not re-checked by locking: another
	// test process may rightly have claimed them already).
	for _, h := range b.Hosts {
		if h.lock != nil {
			t.Errorf("%s: lock still held", h.IP)
		}
		if err := h.Start(); err == nil {
			t.Errorf("Start after Close succeeded")
		}
	}
}

func TestPasswordAuthOption(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		b := New(t, Options{Hosts: 1, PasswordAuth: on})
		cfg, err := os.ReadFile(b.Hosts[0].configPath())
		if err != nil {
			t.Fatal(err)
		}
		want := "PasswordAuthentication no\n"
		if on {
			want = "PasswordAuthentication yes\n"
		}
		if !bytes.Contains(cfg, []byte(want)) || !bytes.Contains(cfg, []byte("PermitRootLogin prohibit-password\n")) {
			t.Errorf("PasswordAuth=%v config:\n%s", on, cfg)
		}
	}
}
