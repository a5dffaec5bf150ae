// Package testbed starts real OpenSSH sshd processes as stand-in hosts for
// tests, benches and demos. Each host listens on its own 127.0.0.x:22, has its
// own host key and runs in a private mount namespace with its own /data, so
// drover can be exercised end to end on one machine without any agent.
//
// The package needs root: it binds port 22, mounts, creates the drover-app
// account and signals the processes it started.
package testbed

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"
)

// AppUser is the non-root account the client key is also accepted for.
const AppUser = "drover-app"

const (
	sshdPath = "/usr/sbin/sshd"
	// lockDir is machine-wide so that every process using a testbed (go test
	// runs packages in parallel) sees the same address claims.
	lockDir = "/tmp/drover-testbed-locks"
	// maxParallelStarts bounds concurrent sshd start-ups; beyond this the
	// 2-core machines only thrash.
	maxParallelStarts = 16
)

// Options configures Start.
type Options struct {
	Hosts int    // number of sshd hosts
	Dir   string // base directory; created if missing; if empty use os.MkdirTemp
	// CloudOf optionally assigns a bk_cloud_id per host index (default 0).
	CloudOf func(i int) int
	// PasswordAuth turns on sshd password authentication (off by default, as
	// on hardened hosts). Setting a password for an account is up to the
	// caller; root stays key-only because of PermitRootLogin prohibit-password.
	PasswordAuth bool
	// Certificates gives the bed a host CA and a user CA: each host serves
	// a certificate of its key signed by the host CA for its IP
	// (HostCertificate) and accepts user certificates signed by the user CA
	// (TrustedUserCAKeys) unless their key is revoked (RevokedKeys, see
	// RevokeKey). Signing is done with ssh-keygen -s.
	Certificates bool
}

// Bed is a set of running hosts plus the client-side files to reach them.
type Bed struct {
	Dir            string
	InventoryPath  string // inventory.yaml written by Start
	KnownHostsPath string
	ClientKeyPath  string // private key accepted for root and drover-app
	Hosts          []*Host

	opts           Options
	authorizedKeys string
	ownDir         bool
	ca             *certAuthorities // nil without Options.Certificates

	closeOnce sync.Once
	closeErr  error
}

// tools are resolved once; a missing one is reported with the package to install.
type toolPaths struct {
	unshare, nsenter, mount, sudo, useradd, usermod, cat, keygen string
}

var (
	toolsOnce sync.Once
	tools     toolPaths
	toolsErr  error
)

func findTool(name, pkg string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	// Non-login root shells may lack the sbin directories in PATH.
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found: run apt-get install -y %s", name, pkg)
}

// checkPrereqs reports the first missing requirement with how to fix it.
func checkPrereqs() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("testbed must run as root (it binds port 22, mounts and signals sshd); euid is %d", os.Geteuid())
	}
	if st, err := os.Stat(sshdPath); err != nil || st.IsDir() {
		return fmt.Errorf("%s not found: run apt-get install -y openssh-server", sshdPath)
	}
	toolsOnce.Do(func() {
		var errs []error
		get := func(name, pkg string) string {
			p, err := findTool(name, pkg)
			errs = append(errs, err)
			return p
		}
		tools = toolPaths{
			unshare: get("unshare", "util-linux"),
			nsenter: get("nsenter", "util-linux"),
			mount:   get("mount", "mount"),
			sudo:    get("sudo", "sudo"),
			useradd: get("useradd", "passwd"),
			usermod: get("usermod", "passwd"),
			cat:     get("cat", "coreutils"),
			keygen:  get("ssh-keygen", "openssh-client"),
		}
		toolsErr = errors.Join(errs...)
	})
	return toolsErr
}

// RequireRoot fails the test with a clear message when the machine cannot
// run a testbed: not root, or sshd, sudo or util-linux tools missing.
func RequireRoot(t testing.TB) {
	t.Helper()
	if err := checkPrereqs(); err != nil {
		t.Fatalf("testbed: %v", err)
	}
}

// New starts a bed for a test and closes it when the test ends.
func New(t testing.TB, opts Options) *Bed {
	t.Helper()
	RequireRoot(t)
	b, err := Start(opts)
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("testbed close: %v", err)
		}
	})
	return b
}

// Start brings up opts.Hosts sshd hosts and writes the client key,
// known_hosts and inventory files. On error everything started is stopped.
func Start(opts Options) (_ *Bed, err error) {
	if opts.Hosts < 1 {
		return nil, fmt.Errorf("testbed: Hosts must be >= 1, got %d", opts.Hosts)
	}
	if err := checkPrereqs(); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	if err := prepareMachine(); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}

	b := &Bed{opts: opts}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "drover-testbed-")
		if err != nil {
			return nil, fmt.Errorf("testbed: %w", err)
		}
		b.Dir, b.ownDir = d, true
	} else {
		d, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("testbed: %w", err)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("testbed: %w", err)
		}
		b.Dir = d
	}
	// sshd config files cannot safely carry these characters in paths.
	if strings.ContainsAny(b.Dir, " \t\n\"'\\%#") {
		return nil, fmt.Errorf("testbed: directory %q: must not contain spaces, quotes, %%, # or backslashes", b.Dir)
	}
	// drover-app must be able to reach the authorized_keys file when the
	// directory tree above allows it; see sshdConfig for the fallback.
	if err := os.Chmod(b.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	b.InventoryPath = filepath.Join(b.Dir, "inventory.yaml")
	b.KnownHostsPath = filepath.Join(b.Dir, "known_hosts")
	b.ClientKeyPath = filepath.Join(b.Dir, "id_ed25519")
	b.authorizedKeys = filepath.Join(b.Dir, "authorized_keys")

	_, clientPub, clientPEM, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("testbed: client key: %w", err)
	}
	authLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(clientPub))) + " drover-testbed\n"
	if err := writeFileAtomic(b.ClientKeyPath, clientPEM, 0o600); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	if err := writeFileAtomic(b.ClientKeyPath+".pub", []byte(authLine), 0o644); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	if err := writeFileAtomic(b.authorizedKeys, []byte(authLine), 0o644); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}

	if opts.Certificates {
		if err := b.makeCertAuthorities(); err != nil {
			return nil, fmt.Errorf("testbed: certificate authorities: %w", err)
		}
	}

	// Claim addresses one by one (cheap), then start sshd concurrently.
	next := firstAddr
	for i := 0; i < opts.Hosts; i++ {
		ip, lock, err := claimAddress(&next)
		if err != nil {
			return nil, fmt.Errorf("testbed: host %d: %w", i, err)
		}
		cloud := 0
		if opts.CloudOf != nil {
			cloud = opts.CloudOf(i)
		}
		dir := filepath.Join(b.Dir, fmt.Sprintf("host-%d", i))
		b.Hosts = append(b.Hosts, &Host{
			Index: i, IP: ip, Port: 22, DataDir: filepath.Join(dir, "data"),
			bed: b, cloud: cloud, dir: dir, lock: lock,
		})
	}

	errs := make([]error, len(b.Hosts))
	var g errgroup.Group
	g.SetLimit(maxParallelStarts)
	for i, h := range b.Hosts {
		g.Go(func() error {
			errs[i] = h.setupAndStart()
			return nil
		})
	}
	_ = g.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}

	if err := b.writeKnownHosts(); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	if err := b.WriteInventory(); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	return b, nil
}

// Close stops every host, kills every process living on them, releases the
// address claims and, when Start created the directory, removes it.
func (b *Bed) Close() error {
	b.closeOnce.Do(func() {
		for _, h := range b.Hosts {
			h.mu.Lock()
		}
		err := killHosts(b.Hosts)
		for _, h := range b.Hosts {
			h.closed = true
			if h.lock != nil {
				// Lock files are never removed: unlinking a lock file others
				// may have open would let two holders claim one address.
				_ = h.lock.Close()
				h.lock = nil
			}
			h.mu.Unlock()
		}
		if b.ownDir && b.Dir != "" {
			err = errors.Join(err, os.RemoveAll(b.Dir))
		}
		b.closeErr = err
	})
	return b.closeErr
}

// prepareMachine does the idempotent machine-wide setup every bed needs.
func prepareMachine() error {
	// sshd refuses to start without its privilege separation directory.
	for _, d := range []string{"/run/sshd", "/data"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return err
	}
	return ensureAppUser()
}

// ensureAppUser creates drover-app once, even with several test processes
// racing: the creation is serialised by a machine-wide lock.
func ensureAppUser() error {
	f, err := os.OpenFile(filepath.Join(lockDir, "accounts.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // closing releases the lock
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock accounts: %w", err)
	}

	if _, err := user.Lookup(AppUser); err != nil {
		var unknown user.UnknownUserError
		if !errors.As(err, &unknown) {
			return fmt.Errorf("look up %s: %w", AppUser, err)
		}
		// "*" rather than useradd's default "!": sshd without PAM treats a
		// "!" password field as a locked account and refuses even key logins.
		out, err := exec.Command(tools.useradd, "-m", "-s", "/bin/sh", "-p", "*", AppUser).CombinedOutput()
		if err != nil {
			return fmt.Errorf("useradd %s: %v: %s", AppUser, err, strings.TrimSpace(string(out)))
		}
	}
	locked, err := shadowLocked(AppUser)
	if err != nil {
		return err
	}
	if locked {
		out, err := exec.Command(tools.usermod, "-p", "*", AppUser).CombinedOutput()
		if err != nil {
			return fmt.Errorf("usermod %s: %v: %s", AppUser, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

func shadowLocked(name string) (bool, error) {
	data, err := os.ReadFile("/etc/shadow")
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Split(line, ":")
		if len(fields) > 1 && fields[0] == name {
			return strings.HasPrefix(fields[1], "!"), nil
		}
	}
	return false, nil
}

// newKey makes an ed25519 key in Go: much faster than one ssh-keygen
// process per host when benches start hundreds of hosts.
func newKey() (ed25519.PrivateKey, ssh.PublicKey, []byte, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	blk, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, nil, nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, nil, err
	}
	return priv, sshPub, pem.EncodeToMemory(blk), nil
}

// writeFileAtomic replaces path in one step so a reader (sshd loading a host
// key, a process loading the inventory) never sees a partial file.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
