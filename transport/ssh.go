package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"

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
	// IdleTimeout closes a pooled connection unused for longer: no
	// command on it, none finished within the timeout, and no connection
	// tunnelling through it. Hosts a worker no longer runs commands on then
	// hold no sshd session. 0 means never.
	IdleTimeout time.Duration
	// MaxDials caps dials in flight (TCP connect plus handshake, bastions
	// included), so a cold operation over thousands of hosts does not open
	// thousands of sockets at once; the rest wait their turn, which does
	// not count against DialTimeout. Default 256.
	MaxDials int
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
	IdleClosed int64 // connections closed after IdleTimeout unused
	KeyLoads   int64 // identity files read and parsed
	Redials    int64 // dials tried again after a handshake ran out of time
}

// SSH runs commands over SSH with no agent on the host. Connections are
// pooled per (address, login user, credentials, bastion) and shared by
// concurrent Runs. It is safe for concurrent use.
type SSH struct {
	opts  SSHOptions
	keys  *hostKeys
	ids   identities
	ctx   context.Context // cancelled by Close; bounds dials in flight
	stop  context.CancelFunc
	wg    sync.WaitGroup
	mu    sync.Mutex
	pool  map[poolKey]*poolEntry
	close bool
	// dials holds a slot per dial in flight; dialsQueued counts the dials
	// waiting for one.
	dials       chan struct{}
	dialsQueued atomic.Int32

	handshakes, poolHits, execs, evictions, trims, idleClosed, redials atomic.Int64
}

var (
	_ Runner    = (*SSH)(nil)
	_ Connector = (*SSH)(nil)
)

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
	if opts.MaxDials <= 0 {
		opts.MaxDials = 256
	}
	if opts.AgentSocket == "" {
		opts.AgentSocket = os.Getenv("SSH_AUTH_SOCK")
	}
	keys, err := newHostKeys(opts.KnownHostsPath)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &SSH{opts: opts, keys: keys, ctx: ctx, stop: stop, pool: map[poolKey]*poolEntry{},
		dials: make(chan struct{}, opts.MaxDials)}
	if opts.IdleTimeout > 0 {
		s.wg.Add(1)
		go s.closeIdle()
	}
	return s, nil
}

// Stats returns the counters so far.
func (s *SSH) Stats() SSHStats {
	return SSHStats{
		Handshakes: s.handshakes.Load(),
		Redials:    s.redials.Load(),
		PoolHits:   s.poolHits.Load(),
		Execs:      s.execs.Load(),
		Evictions:  s.evictions.Load(),
		Trims:      s.trims.Load(),
		IdleClosed: s.idleClosed.Load(),
		KeyLoads:   s.ids.loads.Load(),
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

// Run runs cmd on host. A non-zero exit is a Result, not an error; every
// error is a *Error. cmd.Timeout bounds connecting, and then the command
// from when the connection has a free session for it: ctx alone bounds the
// wait for that session. When ctx or cmd.Timeout ends the wait:
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
	if err := ctx.Err(); err != nil {
		return Result{}, &Error{Kind: KindTimeout, Host: addr, Err: fmt.Errorf("command not started: %w", err)}
	}
	key := keyFor(host)
	for attempt := 0; ; attempt++ {
		c, err := s.dialFor(ctx, key, cmd.Timeout)
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

// dialFor is get bounded by timeout too: a command's timeout covers
// connecting to its host, though not the wait for a free session.
func (s *SSH) dialFor(ctx context.Context, key poolKey, timeout time.Duration) (*conn, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return s.get(ctx, key)
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

// runOn runs cmd on c. fresh reports that c failed before the command was
// sent, and has been evicted, so the caller may retry on a new connection.
func (s *SSH) runOn(ctx context.Context, c *conn, loginUser string, cmd Command) (_ Result, _ error, fresh bool) {
	addr := c.key.target.Addr
	fail := func(kind Kind, err error) *Error { return &Error{Kind: kind, Host: addr, Err: err} }

	queued := time.Now()
	select {
	case c.sem <- struct{}{}:
	case <-c.done:
		return Result{}, fail(KindUnreachable, fmt.Errorf("connection lost; command not started: %w", errConnClosed)), true
	case <-ctx.Done():
		return Result{}, fail(KindTimeout, fmt.Errorf("no free session in %v, all %d busy; command not started: %w",
			since(queued), cap(c.sem), ctx.Err())), false
	}
	defer func() {
		// Idle time counts from the end of the last command, not its start.
		c.lastUsed.Store(time.Now().UnixNano())
		<-c.sem
	}()
	// The command's timeout runs from here: time spent queued behind this
	// worker's own commands to the host is not the host's.
	if cmd.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmd.Timeout)
		defer cancel()
	}

	opening := time.Now()
	sess, err := openSession(ctx, c)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, errConnClosed) {
			return Result{}, fail(KindUnreachable, fmt.Errorf("host opened no session in %v (after %v queued); command not started: %w",
				since(opening), opening.Sub(queued).Round(time.Millisecond), ctx.Err())), false
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
	if d, ok := ctx.Deadline(); ok && !cmd.Bounded {
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

// since is the time from t, rounded for messages.
func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

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
