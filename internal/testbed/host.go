package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// readyTimeout is generous because a bench may start hundreds of sshd on
// two cores while other test packages run.
const readyTimeout = 60 * time.Second

// MaxSessions is each host's sshd MaxSessions.
const MaxSessions = 128

// Host is one sshd standing in for a machine.
type Host struct {
	Index   int
	IP      string // 127.0.0.x
	Port    int    // 22
	DataDir string // host-side directory bind-mounted at /data inside the host

	bed   *Bed
	cloud int
	dir   string
	lock  *os.File // address claim, held until Close

	mu     sync.Mutex
	pub    ssh.PublicKey
	cmd    *exec.Cmd
	pid    int
	done   chan struct{} // closed once the sshd listener has been reaped
	paused bool
	closed bool
}

// Addr is the host's dial address, ip:port.
func (h *Host) Addr() string { return net.JoinHostPort(h.IP, strconv.Itoa(h.Port)) }

// LogPath is sshd's log file (LogLevel VERBOSE).
func (h *Host) LogPath() string { return filepath.Join(h.dir, "sshd.log") }

// PublicKey is the host key sshd currently serves.
func (h *Host) PublicKey() ssh.PublicKey {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pub
}

// Pid is the sshd listener's pid, 0 when the host is stopped.
func (h *Host) Pid() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pid
}

func (h *Host) homeDir() string    { return filepath.Join(h.dir, "root-home") }
func (h *Host) keyPath() string    { return filepath.Join(h.dir, "ssh_host_ed25519_key") }
func (h *Host) configPath() string { return filepath.Join(h.dir, "sshd_config") }
func (h *Host) pidPath() string    { return filepath.Join(h.dir, "sshd.pid") }
func (h *Host) stderrPath() string { return filepath.Join(h.dir, "sshd.stderr") }

// setupAndStart lays out a fresh host directory and starts sshd.
func (h *Host) setupAndStart() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := os.MkdirAll(h.dir, 0o755); err != nil {
		return err
	}
	// Sticky and world-writable like /tmp, so root and drover-app can both
	// keep pid files under /data.
	if err := os.MkdirAll(h.homeDir(), 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(h.DataDir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(h.DataDir, 0o1777); err != nil {
		return err
	}
	for _, p := range []string{h.LogPath(), h.stderrPath()} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return err
		}
	}
	if err := h.writeHostKey(); err != nil {
		return err
	}
	if err := os.WriteFile(h.configPath(), []byte(h.sshdConfig()), 0o644); err != nil {
		return err
	}
	return h.startLocked()
}

func (h *Host) writeHostKey() error {
	_, pub, pemBytes, err := newKey()
	if err != nil {
		return err
	}
	if err := writeFileAtomic(h.keyPath(), pemBytes, 0o600); err != nil {
		return err
	}
	h.pub = pub
	return h.signHostKeyLocked()
}

func (h *Host) sshdConfig() string {
	password := "no"
	if h.bed.opts.PasswordAuth {
		password = "yes"
	}
	sftp := "internal-sftp"
	if _, err := os.Stat("/usr/lib/openssh/sftp-server"); err == nil {
		sftp = "/usr/lib/openssh/sftp-server" // what a stock Debian host runs
	}
	var b strings.Builder
	w := func(k string, v ...any) { fmt.Fprintln(&b, append([]any{k}, v...)...) }
	w("ListenAddress", h.Addr())
	w("HostKey", h.keyPath())
	w("PidFile", h.pidPath())
	w("AuthorizedKeysFile", h.bed.authorizedKeys)
	// sshd reads AuthorizedKeysFile as the target user; when the bed lives
	// under a directory drover-app cannot traverse (t.TempDir is 0700) the
	// same file is served by this root-run command instead.
	w("AuthorizedKeysCommand", tools.cat, h.bed.authorizedKeys)
	w("AuthorizedKeysCommandUser", "root")
	w("PubkeyAuthentication", "yes")
	w("PermitRootLogin", "prohibit-password")
	w("PasswordAuthentication", password)
	w("KbdInteractiveAuthentication", "no")
	w("UsePAM", "no")
	w("StrictModes", "no")
	w("MaxStartups", "1000:30:1000")
	w("PerSourceMaxStartups", "none")
	// Room for benches whose identities share one connection to a host
	// (testbed.MaxSessions); drover's own default uses 8.
	w("MaxSessions", strconv.Itoa(MaxSessions))
	w("LogLevel", "VERBOSE")
	w("PrintMotd", "no")
	w("PrintLastLog", "no")
	w("UseDNS", "no")
	w("X11Forwarding", "no")
	w("Subsystem", "sftp", sftp)
	h.certConfig(w)
	// No AcceptEnv: clients cannot push environment variables.
	return b.String()
}

// Start starts a stopped host again, with the same key and address.
func (h *Host) Start() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.startLocked()
}

func (h *Host) startLocked() error {
	if h.closed {
		return fmt.Errorf("host %s: bed is closed", h.IP)
	}
	if h.cmd != nil {
		return nil
	}
	if err := os.Remove(h.pidPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	stderr, err := os.OpenFile(h.stderrPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer stderr.Close()
	// unshare and sh both exec, so the started pid ends up being sshd itself.
	// Root's home is an empty directory of the host's own: sshd runs
	// commands through root's login shell, and bash reads ~/.bashrc when
	// started by sshd, so the machine's rc files (a pyenv init, say) would
	// otherwise run, and can hang, on every exec.
	script := fmt.Sprintf("%[1]s --bind '%[2]s' /data && %[1]s --bind '%[3]s' /root && exec %[4]s -D -e -f '%[5]s' -E '%[6]s'",
		tools.mount, h.DataDir, h.homeDir(), sshdPath, h.configPath(), h.LogPath())
	cmd := exec.Command(tools.unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: a terminal's Ctrl-C reaches only the command,
		// which then stops the hosts in order.
		Setpgid: true,
		// If this process dies without Close, sshd dies with it rather than
		// lingering on the address.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := spawn(cmd); err != nil {
		return fmt.Errorf("host %s: start sshd: %w", h.IP, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	h.cmd, h.pid, h.done, h.paused = cmd, cmd.Process.Pid, done, false
	if err := h.waitReady(); err != nil {
		_ = killHosts([]*Host{h})
		return err
	}
	return nil
}

// waitReady waits for sshd to write its pid file, which it does only after
// binding its listener; unlike probing the port this leaves no stray
// connection in the log.
func (h *Host) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	for {
		if data, err := os.ReadFile(h.pidPath()); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid == h.pid {
				return nil
			}
		}
		select {
		case <-h.done:
			return fmt.Errorf("host %s: sshd exited: %s", h.IP, h.diagnostics())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("host %s: sshd not ready after %s: %s", h.IP, readyTimeout, h.diagnostics())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *Host) diagnostics() string {
	var parts []string
	for _, p := range []string{h.stderrPath(), h.LogPath()} {
		data, _ := os.ReadFile(p)
		if s := strings.TrimSpace(string(data)); s != "" {
			if len(s) > 2000 {
				s = s[len(s)-2000:]
			}
			parts = append(parts, filepath.Base(p)+": "+s)
		}
	}
	if len(parts) == 0 {
		return "no output"
	}
	return strings.Join(parts, "; ")
}

// Stop kills sshd and every process living in the host's mount namespace,
// like pulling the plug. The address stays claimed for Start.
func (h *Host) Stop() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return killHosts([]*Host{h})
}

// Pause freezes the host with SIGSTOP: the listener and all its
// descendants, so new connections and existing sessions both hang.
func (h *Host) Pause() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil {
		return fmt.Errorf("host %s: not running", h.IP)
	}
	if h.paused {
		return nil
	}
	// Stop the listener first so it forks no more, then sweep descendants
	// until a pass finds nothing new (a child may fork while being swept).
	if err := syscall.Kill(h.pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("host %s: pause: %w", h.IP, err)
	}
	h.paused = true
	stopped := map[int]bool{h.pid: true}
	for pass := 0; pass < 100; pass++ {
		found := false
		for _, pid := range descendants(h.pid, scanProcs(false)) {
			if !stopped[pid] {
				stopped[pid] = true
				found = true
				_ = syscall.Kill(pid, syscall.SIGSTOP)
			}
		}
		if !found {
			return nil
		}
	}
	return fmt.Errorf("host %s: pause: processes kept appearing", h.IP)
}

// Resume undoes Pause with SIGCONT.
func (h *Host) Resume() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil {
		return fmt.Errorf("host %s: not running", h.IP)
	}
	for _, pid := range descendants(h.pid, scanProcs(false)) {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	if err := syscall.Kill(h.pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("host %s: resume: %w", h.IP, err)
	}
	h.paused = false
	return nil
}

// DropConnections kills sshd's per-connection processes, and so every open
// session and pooled connection, while the listener stays up, as a network
// blip or an sshd restart does to clients. It returns how many it killed.
func (h *Host) DropConnections() (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil {
		return 0, fmt.Errorf("host %s: not running", h.IP)
	}
	n := 0
	for _, p := range scanProcs(false) {
		if p.ppid == h.pid && syscall.Kill(p.pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n, nil
}

// DropSessions is DropConnections that also kills everything the sessions
// run (a command, an sftp-server), as a host that loses its connections
// mid-transfer is left: nothing of the session goes on writing. It works on
// a paused host too (SIGKILL needs no SIGCONT). It returns how many
// processes it killed.
func (h *Host) DropSessions() (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil {
		return 0, fmt.Errorf("host %s: not running", h.IP)
	}
	procs := scanProcs(false)
	var victims []int
	for _, p := range procs {
		if p.ppid == h.pid {
			victims = append(victims, p.pid)
			victims = append(victims, descendants(p.pid, procs)...)
		}
	}
	n := 0
	for _, pid := range victims {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n, nil
}

// RotateHostKey gives the host a new host key (and certificate, on a bed
// with Certificates) and restarts sshd (SIGHUP re-execs it in place,
// keeping the pid, the mount namespace and processes on the host).
// known_hosts is deliberately left alone, so clients see a changed host key.
func (h *Host) RotateHostKey() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.reloadableLocked(); err != nil {
		return err
	}
	if err := h.writeHostKey(); err != nil {
		return err
	}
	return h.reloadLocked()
}

// reloadableLocked refuses to change what sshd serves on a host that could
// not be restarted to serve it.
func (h *Host) reloadableLocked() error {
	if h.closed {
		return fmt.Errorf("host %s: bed is closed", h.IP)
	}
	if h.paused {
		return fmt.Errorf("host %s: paused; resume it first", h.IP)
	}
	return nil
}

// reloadLocked restarts a running sshd so it serves the key and
// certificate now on disk; a stopped one reads them at its next Start.
func (h *Host) reloadLocked() error {
	if h.cmd == nil {
		return nil
	}
	// The pid file is rewritten only after the re-exec'd sshd has bound
	// again, so its reappearance means the new key is served.
	if err := os.Remove(h.pidPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := syscall.Kill(h.pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("host %s: restart sshd: %w", h.IP, err)
	}
	return h.waitReady()
}

// Exec runs `sh -c script` as root inside the host's mount namespace and
// returns its stdout. Background processes it starts should detach and
// redirect their stdio (setsid cmd >/dev/null 2>&1 </dev/null &), or Exec
// gives up waiting for their output shortly after the script exits.
func (h *Host) Exec(script string) (string, error) {
	pid := h.Pid()
	if pid == 0 {
		return "", fmt.Errorf("host %s: not running", h.IP)
	}
	cmd := exec.Command(tools.nsenter, "--target", strconv.Itoa(pid), "--mount", "--", "/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "USER=root", "LOGNAME=root"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // the script itself succeeded; a child kept the pipe open
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("host %s: exec: %w: %s", h.IP, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// spawn starts commands from one goroutine locked to its OS thread for the
// life of the process. Pdeathsig fires when the thread that forked the child
// exits, not the process; an ordinary goroutine's thread may exit early.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread()
			for r := range spawnCh {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawnCh <- spawnReq{cmd: cmd, errc: errc}
	return <-errc
}

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)
