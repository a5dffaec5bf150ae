package transport

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/drover-sh/drover/inventory"
)

// SSHOptions configures the SSH transport.
type SSHOptions struct {
	// KnownHostsPath is the known_hosts file every host and bastion key is
	// verified against. Required: there is no insecure mode.
	KnownHostsPath string
	// DialTimeout bounds TCP connect plus SSH handshake. Default 5s.
	DialTimeout time.Duration
	// KeepAlive is the interval of keepalive@openssh.com requests on pooled
	// connections; one unanswered within the interval evicts the
	// connection. Default 15s.
	KeepAlive time.Duration
	// MaxSessionsPerHost caps concurrent sessions on one pooled connection.
	// Default 8, below OpenSSH's MaxSessions 10 so that the short session
	// that kills a cancelled command always fits.
	MaxSessionsPerHost int
	// AgentSocket is the ssh-agent socket; default $SSH_AUTH_SOCK. Used
	// when non-empty.
	AgentSocket string
	// MaxPooled caps pooled connections: past it, the least recently used
	// idle ones are closed, so a worker over a large fleet stays within its
	// file descriptors. 0 means no cap.
	MaxPooled int
	// TrustOnFirstUse records the key of a host missing from known_hosts
	// there and accepts it. A changed or revoked key is still refused. Off
	// by default: a first connection then cannot be told from a MITM.
	TrustOnFirstUse bool
	// OnTrust, when set, is told of each key trusted on first use.
	OnTrust func(addr, fingerprint string)
}

// SSHStats are cumulative counters, for metrics and benchmarks.
type SSHStats struct {
	Handshakes int64 // SSH connections established, bastions included
	PoolHits   int64 // Runs served by an already established connection
	Execs      int64 // commands sent to a host
	Evictions  int64 // pooled connections dropped as dead
	Trims      int64 // idle connections closed to stay within MaxPooled
}

// SSH runs commands over SSH with no agent on the host. Connections are
// pooled per (address, login user, credentials, bastion) and shared by
// concurrent Runs. It is safe for concurrent use.
type SSH struct {
	opts  SSHOptions
	keys  *hostKeys
	ctx   context.Context // cancelled by Close; bounds dials in flight
	stop  context.CancelFunc
	wg    sync.WaitGroup
	mu    sync.Mutex
	pool  map[poolKey]*poolEntry
	close bool

	handshakes, poolHits, execs, evictions, trims atomic.Int64
}

var _ Runner = (*SSH)(nil)

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("ssh transport closed")

// killTimeout bounds the extra session that kills a cancelled command.
const killTimeout = 3 * time.Second

// watchdogGrace is how much later than the client's deadline the host-side
// watchdog fires, so the client's own kill, which reports cleanly, goes
// first whenever the host is reachable.
const watchdogGrace = 2 * time.Second

// NewSSH checks opts and loads the known_hosts file.
func NewSSH(opts SSHOptions) (*SSH, error) {
	if opts.KnownHostsPath == "" {
		return nil, errors.New("ssh: KnownHostsPath is required")
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.MaxSessionsPerHost <= 0 {
		opts.MaxSessionsPerHost = 8
	}
	if opts.AgentSocket == "" {
		opts.AgentSocket = os.Getenv("SSH_AUTH_SOCK")
	}
	keys, err := newHostKeys(opts.KnownHostsPath)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	return &SSH{opts: opts, keys: keys, ctx: ctx, stop: stop, pool: map[poolKey]*poolEntry{}}, nil
}

// Stats returns the counters so far.
func (s *SSH) Stats() SSHStats {
	return SSHStats{
		Handshakes: s.handshakes.Load(),
		PoolHits:   s.poolHits.Load(),
		Execs:      s.execs.Load(),
		Evictions:  s.evictions.Load(),
		Trims:      s.trims.Load(),
	}
}

// Close drops every pooled connection; commands still running fail as
// unreachable. Later Runs return ErrClosed.
func (s *SSH) Close() error {
	s.mu.Lock()
	s.close = true
	var conns []*conn
	for _, e := range s.pool {
		select {
		case <-e.ready:
			if e.c != nil {
				conns = append(conns, e.c)
			}
		default:
		}
	}
	s.pool = map[poolKey]*poolEntry{}
	s.mu.Unlock()
	s.stop()
	for _, c := range conns {
		c.shut()
	}
	s.wg.Wait()
	return nil
}

// endpoint is one SSH login: where and with which credentials.
type endpoint struct {
	Addr, User, IdentityFile, PasswordEnv, PassphraseEnv string
}

func (e endpoint) String() string { return e.User + "@" + e.Addr }

// poolKey names a pooled connection. Credentials are part of it so that
// one host entry's working key never hides another's broken one.
type poolKey struct {
	target  endpoint
	bastion endpoint // zero when direct
}

func keyFor(h inventory.Host) poolKey {
	k := poolKey{target: endpoint{Addr: h.DialAddress(), User: h.User, IdentityFile: h.IdentityFile,
		PasswordEnv: h.PasswordEnv, PassphraseEnv: h.PassphraseEnv}}
	if b := h.Bastion; b != nil {
		k.bastion = endpoint{Addr: b.Address, User: b.User, IdentityFile: b.IdentityFile,
			PasswordEnv: b.PasswordEnv, PassphraseEnv: b.PassphraseEnv}
	}
	return k
}

// poolEntry is a connection being dialled or established. ready closes
// when the dial ends; c or err is set by then. Concurrent first users wait
// on the same entry, so a host gets one handshake.
type poolEntry struct {
	ready chan struct{}
	c     *conn
	err   error
}

// conn is one pooled, authenticated connection.
type conn struct {
	key    poolKey
	client *ssh.Client
	sem    chan struct{} // session slots for commands
	kills  chan struct{} // extra slots for the sessions that kill commands
	done   chan struct{} // closed when evicted
	once   sync.Once
	// lastUsed is when a Run last took this connection, in unix nanoseconds.
	lastUsed atomic.Int64
}

// killSlots is the headroom left between MaxSessionsPerHost's default and
// OpenSSH's MaxSessions: a cancelled command's session stays counted until
// its process dies, so its kill session needs a slot of its own.
const killSlots = 2

// shut closes c; it reports whether this call was the one that did.
func (c *conn) shut() (closed bool) {
	c.once.Do(func() {
		closed = true
		close(c.done)
		_ = c.client.Close()
	})
	return closed
}

func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// Run runs cmd on host. A non-zero exit is a Result, not an error; every
// error is a *Error. When ctx or cmd.Timeout ends the wait:
//   - before the command was sent, because the host did not connect or
//     open a session in time: KindUnreachable;
//   - before it was sent, while all of the connection's sessions were
//     busy: KindTimeout;
//   - after it was sent: KindTimeout, with the remote command killed and
//     the output so far in the Result.
//
// A connection lost mid-command is KindUnreachable; the command may have
// run and is never retried.
func (s *SSH) Run(ctx context.Context, host inventory.Host, cmd Command) (Result, error) {
	addr := host.DialAddress()
	if host.Transport != "" && host.Transport != inventory.TransportSSH {
		return Result{}, &Error{Kind: KindUnsupported, Host: addr, Err: fmt.Errorf("transport %q is not ssh", host.Transport)}
	}
	if sh := shellOf(cmd); sh != ShellSh {
		return Result{}, &Error{Kind: KindUnsupported, Host: addr, Err: fmt.Errorf("ssh hosts run sh scripts, not %s", sh)}
	}
	if cmd.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmd.Timeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return Result{}, &Error{Kind: KindTimeout, Host: addr, Err: fmt.Errorf("command not started: %w", err)}
	}
	key := keyFor(host)
	for attempt := 0; ; attempt++ {
		c, err := s.get(ctx, key)
		if err != nil {
			return Result{}, err
		}
		res, err, fresh := s.runOn(ctx, c, host.User, cmd)
		// fresh: the connection died before the command was sent, so one
		// more try on a new connection cannot run it twice.
		if fresh && attempt == 0 && ctx.Err() == nil {
			continue
		}
		return res, err
	}
}

// Connect establishes host's pooled connection without running anything,
// so that a caller can overlap the handshake with other work; a Run that
// follows joins the dial in flight. A host that is not reached over SSH is
// left alone.
func (s *SSH) Connect(ctx context.Context, host inventory.Host) error {
	if host.Transport != "" && host.Transport != inventory.TransportSSH {
		return nil
	}
	_, err := s.get(ctx, keyFor(host))
	return err
}

// get returns the pooled connection for key, dialling it if needed.
func (s *SSH) get(ctx context.Context, key poolKey) (*conn, error) {
	addr := key.target.Addr
	s.mu.Lock()
	if s.close {
		s.mu.Unlock()
		return nil, &Error{Kind: KindUnreachable, Host: addr, Err: ErrClosed}
	}
	e := s.pool[key]
	if e != nil {
		select {
		case <-e.ready:
			if e.c != nil && e.c.alive() {
				e.c.lastUsed.Store(time.Now().UnixNano())
				s.mu.Unlock()
				s.poolHits.Add(1)
				return e.c, nil
			}
			e = nil // evicted or failed; dial again
		default:
		}
	}
	if e == nil {
		e = &poolEntry{ready: make(chan struct{})}
		s.pool[key] = e
		s.wg.Add(1)
		go s.dialEntry(key, e)
	}
	s.mu.Unlock()

	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, &Error{Kind: KindUnreachable, Host: addr, Err: fmt.Errorf("not connected before the deadline: %w", ctx.Err())}
	}
	if e.err != nil {
		return nil, e.err
	}
	e.c.lastUsed.Store(time.Now().UnixNano())
	return e.c, nil
}

// dialEntry dials in the background, independent of any one caller's
// context, so an impatient caller does not fail the others waiting.
func (s *SSH) dialEntry(key poolKey, e *poolEntry) {
	defer s.wg.Done()
	c, err := s.dial(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.close {
		c.shut()
		c, err = nil, &Error{Kind: KindUnreachable, Host: key.target.Addr, Err: ErrClosed}
	}
	e.c, e.err = c, err
	if err != nil && s.pool[key] == e {
		delete(s.pool, key) // failures are not cached: the next Run dials again
	}
	close(e.ready)
	if c != nil {
		c.lastUsed.Store(time.Now().UnixNano())
		s.wg.Add(2)
		go s.watch(c)
		go s.keepAlive(c)
		for _, old := range s.overCapLocked() {
			go func() {
				if old.shut() {
					s.trims.Add(1)
				}
			}()
		}
	}
}

// overCapLocked removes from the pool, least recently used first, the idle
// connections beyond MaxPooled and returns them for closing. A connection
// with a session open is never among them; a Run that took one just before
// finds it closed before its command was sent, and dials afresh.
func (s *SSH) overCapLocked() []*conn {
	excess := len(s.pool) - s.opts.MaxPooled
	if s.opts.MaxPooled <= 0 || excess <= 0 {
		return nil
	}
	var idle []*conn
	for _, e := range s.pool {
		select {
		case <-e.ready:
			if e.c != nil && len(e.c.sem) == 0 {
				idle = append(idle, e.c)
			}
		default:
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].lastUsed.Load() < idle[j].lastUsed.Load() })
	if len(idle) > excess {
		idle = idle[:excess]
	}
	for _, c := range idle {
		delete(s.pool, c.key)
	}
	return idle
}

// evict drops c from the pool and closes it.
func (s *SSH) evict(c *conn) {
	s.mu.Lock()
	if e := s.pool[c.key]; e != nil && e.c == c {
		delete(s.pool, c.key)
	}
	s.mu.Unlock()
	if c.shut() {
		s.evictions.Add(1)
	}
}

// watch evicts c as soon as the server or network closes it.
func (s *SSH) watch(c *conn) {
	defer s.wg.Done()
	_ = c.client.Wait()
	s.evict(c)
}

// keepAlive evicts c when a keepalive goes unanswered for one interval: a
// silently dead peer (host down, network cut, process frozen) is otherwise
// noticed only when a command hangs.
func (s *SSH) keepAlive(c *conn) {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		reply := make(chan error, 1)
		go func() {
			// OpenSSH answers unknown global requests with a failure; any
			// answer proves the peer is alive.
			_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		timer := time.NewTimer(s.opts.KeepAlive)
		select {
		case err := <-reply:
			timer.Stop()
			if err != nil {
				s.evict(c)
				return
			}
		case <-timer.C:
			s.evict(c)
			return
		case <-c.done:
			timer.Stop()
			return
		}
	}
}

// dial establishes an authenticated connection for key, through its
// bastion when it has one.
func (s *SSH) dial(key poolKey) (*conn, error) {
	t := key.target
	fail := func(kind Kind, err error) (*conn, error) {
		return nil, &Error{Kind: kind, Host: t.Addr, Err: err}
	}
	auth, closeAgent, err := s.authMethods(t)
	if err != nil {
		return fail(KindAuth, err)
	}
	defer closeAgent()

	var bastion *ssh.Client
	via := ""
	if key.bastion != (endpoint{}) {
		// The bastion connection has its own dial budget and is shared by
		// every host behind it.
		b := key.bastion
		via = " via bastion " + b.String()
		bc, err := s.get(s.ctx, poolKey{target: b})
		if err != nil {
			kind := KindOf(err)
			var te *Error
			if errors.As(err, &te) {
				err = te.Err
			}
			return fail(kind, fmt.Errorf("bastion %s: %w", b, err))
		}
		bastion = bc.client
	}

	// One budget covers TCP connect (or the bastion's tunnel) and handshake.
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.DialTimeout)
	defer cancel()
	var raw net.Conn
	if bastion != nil {
		raw, err = bastion.DialContext(ctx, "tcp", t.Addr)
		if err != nil {
			return fail(KindUnreachable, fmt.Errorf("bastion %s could not reach the host: %w", key.bastion, err))
		}
	} else {
		raw, err = (&net.Dialer{}).DialContext(ctx, "tcp", t.Addr)
		if err != nil {
			return fail(KindUnreachable, err)
		}
	}

	check, algos, err := s.keys.callback(t.Addr)
	if err != nil {
		raw.Close()
		return fail(KindHostKey, err)
	}
	// The callback also runs on re-keys, in the library's own goroutine.
	var keyErr atomic.Pointer[error]
	cfg := &ssh.ClientConfig{
		User: t.User,
		Auth: auth,
		HostKeyCallback: func(hostname string, remote net.Addr, k ssh.PublicKey) error {
			err := check(hostname, remote, k)
			if err != nil && s.opts.TrustOnFirstUse && unknownHost(err) {
				if err = s.keys.trust(hostname, remote, k); err == nil && s.opts.OnTrust != nil {
					s.opts.OnTrust(hostname, ssh.FingerprintSHA256(k))
				}
			}
			if err != nil {
				keyErr.Store(&err)
			}
			return err
		},
		HostKeyAlgorithms: algos,
	}
	// Closing the socket when the budget runs out (or on Close) bounds the
	// handshake; it also works for a tunnel through a bastion, whose
	// channels have no deadlines.
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	cc, chans, reqs, err := ssh.NewClientConn(raw, t.Addr, cfg)
	timedOut := !stop()
	if timedOut && err == nil {
		cc.Close()
		err = errors.New("connection closed at the dial deadline")
	}
	if err != nil {
		switch {
		case keyErr.Load() != nil:
			return fail(KindHostKey, s.keys.explain(t.Addr, *keyErr.Load()))
		case strings.Contains(err.Error(), "ssh: unable to authenticate"):
			return fail(KindAuth, fmt.Errorf("authenticate as %s%s: %w", t.User, via, err))
		case timedOut && s.ctx.Err() != nil:
			return fail(KindUnreachable, ErrClosed)
		case timedOut:
			return fail(KindUnreachable, fmt.Errorf("handshake%s timed out after %v", via, s.opts.DialTimeout))
		}
		return fail(KindUnreachable, fmt.Errorf("handshake%s: %w", via, err))
	}
	s.handshakes.Add(1)
	return &conn{
		key:    key,
		client: ssh.NewClient(cc, chans, reqs),
		sem:    make(chan struct{}, s.opts.MaxSessionsPerHost),
		kills:  make(chan struct{}, killSlots),
		done:   make(chan struct{}),
	}, nil
}

// authMethods builds, in order: the identity file and agent keys (one
// publickey method, since the library tries only the first of each kind),
// then the password. The returned func releases the agent connection.
func (s *SSH) authMethods(e endpoint) ([]ssh.AuthMethod, func(), error) {
	var signers []ssh.Signer
	if e.IdentityFile != "" {
		pem, err := os.ReadFile(e.IdentityFile)
		if err != nil {
			return nil, nil, fmt.Errorf("identity file %s: %w", e.IdentityFile, err)
		}
		signer, err := ssh.ParsePrivateKey(pem)
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			pass, ok := inventory.PasswordFrom(e.PassphraseEnv)
			if !ok {
				return nil, nil, fmt.Errorf("identity file %s is passphrase-protected; set passphrase_env or load it into ssh-agent", e.IdentityFile)
			}
			signer, err = ssh.ParsePrivateKeyWithPassphrase(pem, []byte(pass))
			if errors.Is(err, x509.IncorrectPasswordError) {
				// Never the passphrase itself: only where it came from.
				return nil, nil, fmt.Errorf("identity file %s: the passphrase in %s is wrong", e.IdentityFile, e.PassphraseEnv)
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("identity file %s: %w", e.IdentityFile, err)
		}
		signers = append(signers, signer)
	}
	closeAgent := func() {}
	var agentSigners func() ([]ssh.Signer, error)
	if s.opts.AgentSocket != "" {
		// An unusable agent is skipped: other methods may still work, and
		// a refusal names what was tried.
		if ac, err := net.DialTimeout("unix", s.opts.AgentSocket, s.opts.DialTimeout); err == nil {
			closeAgent = func() { ac.Close() }
			agentSigners = agent.NewClient(ac).Signers
		}
	}
	var methods []ssh.AuthMethod
	if len(signers) > 0 || agentSigners != nil {
		methods = append(methods, ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
			out := signers
			if agentSigners != nil {
				if more, err := agentSigners(); err == nil {
					out = append(out[:len(out):len(out)], more...)
				}
			}
			return out, nil
		}))
	}
	if pw, ok := inventory.PasswordFrom(e.PasswordEnv); ok {
		methods = append(methods,
			ssh.Password(pw),
			// Servers with PasswordAuthentication off often still take the
			// password through keyboard-interactive.
			ssh.KeyboardInteractive(func(_, _ string, questions []string, echos []bool) ([]string, error) {
				answers := make([]string, len(questions))
				for i := range questions {
					if !echos[i] {
						answers[i] = pw
					}
				}
				return answers, nil
			}))
	}
	if len(methods) == 0 {
		closeAgent()
		return nil, nil, fmt.Errorf("no credentials for %s: no identity file, ssh-agent or password (env %q)", e, e.PasswordEnv)
	}
	return methods, closeAgent, nil
}

// runOn runs cmd on c. fresh reports that c failed before the command was
// sent, and has been evicted, so the caller may retry on a new connection.
func (s *SSH) runOn(ctx context.Context, c *conn, loginUser string, cmd Command) (_ Result, _ error, fresh bool) {
	addr := c.key.target.Addr
	fail := func(kind Kind, err error) *Error { return &Error{Kind: kind, Host: addr, Err: err} }

	select {
	case c.sem <- struct{}{}:
	case <-c.done:
		return Result{}, fail(KindUnreachable, fmt.Errorf("connection lost; command not started: %w", errConnClosed)), true
	case <-ctx.Done():
		return Result{}, fail(KindTimeout, fmt.Errorf("no free session before the deadline; command not started: %w", ctx.Err())), false
	}
	defer func() { <-c.sem }()

	sess, err := openSession(ctx, c)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, errConnClosed) {
			return Result{}, fail(KindUnreachable, fmt.Errorf("host opened no session before the deadline; command not started: %w", ctx.Err())), false
		}
		var refused *ssh.OpenChannelError
		if errors.As(err, &refused) {
			return Result{}, fail(KindUnreachable, fmt.Errorf("session refused; command not started: %w", err)), false
		}
		s.evict(c)
		return Result{}, fail(KindUnreachable, fmt.Errorf("connection lost; command not started: %w", err)), true
	}

	stdout := &capBuffer{max: maxOutput}
	stderr := newMarkerStderr()
	sess.Stdout, sess.Stderr = stdout, stderr
	result := func(code int) Result {
		return Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: code}
	}
	s.execs.Add(1)
	started := make(chan error, 1)
	var deadline time.Duration
	if d, ok := ctx.Deadline(); ok {
		deadline = time.Until(d) + watchdogGrace
	}
	go func() { started <- sess.Start(remoteCommand(loginUser, cmd, deadline)) }()
	ended := make(chan struct{}) // closed when the session is over
	var waitErr error
	select {
	case err := <-started:
		if err != nil {
			go sess.Close()
			return Result{}, fail(KindUnreachable, fmt.Errorf("start command: %w", err)), false
		}
		go func() { waitErr = sess.Wait(); close(ended) }()
	case <-ctx.Done():
		return result(-1), fail(KindTimeout, s.cancel(ctx, c, sess, stderr, ended, loginUser, cmd)), false
	}

	select {
	case <-ended:
	case <-ctx.Done():
		select {
		case <-ended: // finished right at the deadline: keep the result
		default:
			return result(-1), fail(KindTimeout, s.cancel(ctx, c, sess, stderr, ended, loginUser, cmd)), false
		}
	}
	err = waitErr
	sess.Close() // both sides have closed the channel; this cannot block

	code := 0
	var exit *ssh.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitStatus()
	default:
		// ExitMissingError or an I/O error: the session ended without an
		// exit status.
		return result(-1), fail(KindUnreachable, fmt.Errorf("connection lost mid-command; the command may have run: %w", err)), false
	}

	res := result(code)
	if ok, _ := stderr.started(); !ok {
		msg := summary(res.Stderr)
		if sudoPrefix(loginUser, cmd.Account) != "" {
			return res, fail(KindSudo, fmt.Errorf("sudo to %s refused (exit %d): %s", cmd.Account, code, msg)), false
		}
		return res, fail(KindUnsupported, fmt.Errorf("login shell of %s did not run sh (exit %d): %s", loginUser, code, msg)), false
	}
	return res, nil, false
}

// openSession is newSession that retries a refused open a few times: the
// server counts a killed command's session until its process is reaped, so
// right after a cancel it can briefly refuse. Nothing has run yet, so
// retrying is safe.
func openSession(ctx context.Context, c *conn) (*ssh.Session, error) {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		sess, err := newSession(ctx, c)
		var refused *ssh.OpenChannelError
		if err == nil || !errors.As(err, &refused) || attempt == 5 {
			return sess, err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, err
		}
		backoff *= 2
	}
}

// errConnClosed reports a channel open abandoned because its connection
// ended.
var errConnClosed = errors.New("connection closed")

// newSession opens a session without outliving ctx or c: a frozen host
// never answers the channel open, and an open that races with the
// connection ending can wait forever inside the ssh library.
func newSession(ctx context.Context, c *conn) (*ssh.Session, error) {
	type opened struct {
		s   *ssh.Session
		err error
	}
	ch := make(chan opened, 1)
	var mu sync.Mutex
	abandoned := false
	go func() {
		sess, err := c.client.NewSession()
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			if err == nil {
				sess.Close()
			}
			return
		}
		ch <- opened{sess, err}
	}()
	var err error
	select {
	case o := <-ch:
		return o.s, o.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-c.done:
		err = errConnClosed
	}
	mu.Lock()
	abandoned = true
	mu.Unlock()
	// The session may have been handed over just before.
	select {
	case o := <-ch:
		if o.err == nil {
			o.s.Close()
		}
	default:
	}
	return nil, err
}

// cancel stops a command whose deadline passed: the remote process group
// is killed, not just the local wait. Processes the script moved into a
// session of their own (setsid, as daemons do) are not in that group and
// survive. It returns the error to report, and returns within killTimeout
// even when the host no longer answers.
func (s *SSH) cancel(ctx context.Context, c *conn, sess *ssh.Session, stderr *markerStderr, ended <-chan struct{}, loginUser string, cmd Command) error {
	why := fmt.Errorf("command stopped: %w", context.Cause(ctx))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && cmd.Timeout > 0 {
		why = fmt.Errorf("command ran past its %v timeout: %w", cmd.Timeout, ctx.Err())
	}
	kctx, kcancel := context.WithTimeout(context.Background(), killTimeout)
	defer kcancel()
	done := make(chan string, 1)
	go func() { done <- s.kill(kctx, c, sess, stderr, ended, loginUser, cmd) }()
	select {
	case note := <-done:
		return fmt.Errorf("%w; %s", why, note)
	case <-kctx.Done():
		return fmt.Errorf("%w; stopping the remote command not confirmed: host did not answer within %v", why, killTimeout)
	}
}

// kill signals the command and, when the wrapper reported its process
// group, kills that group from a second session, then closes the session.
// Writes to a frozen peer can block, so it runs apart from Run. It returns
// what was done, for the error message.
func (s *SSH) kill(ctx context.Context, c *conn, sess *ssh.Session, stderr *markerStderr, ended <-chan struct{}, loginUser string, cmd Command) string {
	defer sess.Close()
	// Once the session is over the group id may be reused: never kill then.
	select {
	case <-ended:
		return "remote command had already ended"
	default:
	}
	// OpenSSH (7.9+) delivers this to the command's process group, as the
	// login user, except for root logins, which it refuses.
	_ = sess.Signal(ssh.SIGKILL)
	// On a loaded host the wrapper may not have announced its group yet
	// although sshd has started it: wait for that, within the kill budget.
	select {
	case <-stderr.seenCh:
	case <-ended:
	case <-ctx.Done():
	}
	select {
	case <-ended:
		return "remote command ended on SIGKILL"
	default:
	}
	_, pgid := stderr.started()
	if pgid <= 1 {
		// The signal is all there is; the host-side watchdog, when armed,
		// covers the rest.
		return "remote command sent SIGKILL; its process group is unknown"
	}
	// The second session makes the kill certain where the signal request is
	// refused or lacks permission (login user not the account).
	var err error
	select {
	case c.kills <- struct{}{}:
		defer func() { <-c.kills }()
		var ksess *ssh.Session
		ksess, err = openSession(ctx, c)
		if err == nil {
			err = ksess.Run(killCommand(loginUser, cmd, pgid))
			ksess.Close()
		}
	case <-ctx.Done():
		err = errors.New("no free session to send the kill")
	}
	if err != nil {
		return fmt.Sprintf("killing remote process group %d not confirmed: %v", pgid, err)
	}
	return fmt.Sprintf("remote process group %d killed", pgid)
}

// summary is the start of remote stderr for an error message.
func summary(b []byte) string {
	const max = 512
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = s[:max]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "..."
	}
	if s == "" {
		return "no message"
	}
	return s
}

// hostKeys is the known_hosts file, re-read when it changes so hosts can
// be added without a restart.
type hostKeys struct {
	path  string
	probe ssh.PublicKey // matches nothing; asking with it lists a host's known keys

	mu      sync.Mutex
	check   ssh.HostKeyCallback
	modTime time.Time
	size    int64
}

func newHostKeys(path string) (*hostKeys, error) {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	probe, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	h := &hostKeys{path: path, probe: probe}
	if _, _, err := h.callback("probe:22"); err != nil {
		return nil, err
	}
	return h, nil
}

// callback returns the current checker and the host key algorithms to
// offer addr: those of its known keys. Without that, the server may pick a
// key type that is not in known_hosts and look like a changed key.
func (h *hostKeys) callback(addr string) (ssh.HostKeyCallback, []string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.loadLocked(); err != nil {
		return nil, nil, err
	}
	var algos []string
	var ke *knownhosts.KeyError
	if err := h.check(addr, &net.TCPAddr{}, h.probe); errors.As(err, &ke) {
		seen := map[string]bool{}
		for _, k := range ke.Want {
			for _, a := range algorithmsFor(k.Key.Type()) {
				if !seen[a] {
					seen[a] = true
					algos = append(algos, a)
				}
			}
		}
	}
	return h.check, algos, nil
}

// loadLocked (re)reads the file when it changed; h.mu is held.
func (h *hostKeys) loadLocked() error {
	fi, err := os.Stat(h.path)
	if err != nil {
		return fmt.Errorf("known_hosts: %w", err)
	}
	if h.check == nil || !fi.ModTime().Equal(h.modTime) || fi.Size() != h.size {
		check, err := knownhosts.New(h.path)
		if err != nil {
			return fmt.Errorf("known_hosts: %w", err)
		}
		h.check, h.modTime, h.size = check, fi.ModTime(), fi.Size()
	}
	return nil
}

// unknownHost reports a refusal because the host has no key on file at
// all, the only case trust on first use may accept.
func unknownHost(err error) bool {
	var ke *knownhosts.KeyError
	return errors.As(err, &ke) && len(ke.Want) == 0
}

// trust appends key for addr to known_hosts, unless the host got a key on
// file meanwhile (another connection trusted it first): then that key
// decides.
func (h *hostKeys) trust(addr string, remote net.Addr, key ssh.PublicKey) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.loadLocked(); err != nil {
		return err
	}
	if err := h.check(addr, remote, key); err == nil || !unknownHost(err) {
		return err
	}
	f, err := os.OpenFile(h.path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("known_hosts: trust on first use: %w", err)
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(addr)}, key) + "\n"
	last := make([]byte, 1)
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		// A file not ending in a newline would glue the line to its last.
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			line = "\n" + line
		}
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("known_hosts: trust on first use: %w", err)
	}
	h.check = nil // re-read on next use
	return nil
}

func algorithmsFor(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}

// explain turns a host key refusal into the message an operator needs.
func (h *hostKeys) explain(addr string, err error) error {
	var ke *knownhosts.KeyError
	var revoked *knownhosts.RevokedError
	switch {
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return fmt.Errorf("host key unknown: %s not in %s: %w", addr, h.path, err)
	case errors.As(err, &ke):
		return fmt.Errorf("host key changed for %s (%s has %s): possible MITM, refusing to connect: %w", addr, h.path, ke.Want[0].String(), err)
	case errors.As(err, &revoked):
		return fmt.Errorf("host key of %s is revoked in %s: %w", addr, revoked.Revoked.Filename, err)
	}
	return fmt.Errorf("host key of %s refused: %w", addr, err)
}
