package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/drover-sh/drover/inventory"
)

// errHandshakeTimedOut marks a dial whose host accepted the connection but
// did not finish the handshake within DialTimeout.
var errHandshakeTimedOut = errors.New("timed out")

// dialOrRetry dials key, and once more when the handshake alone ran out of
// time: the host is listening, and on a loaded machine (sshd forking
// hundreds of handshakes at once, or this worker's cores busy) a second
// try completes. A host that refuses or never accepts is not tried again.
func (s *SSH) dialOrRetry(key poolKey) (*conn, error) {
	c, err := s.dial(key)
	if errors.Is(err, errHandshakeTimedOut) && s.ctx.Err() == nil {
		s.redials.Add(1)
		c, err = s.dial(key)
	}
	return c, err
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

	var bastion *conn
	via := ""
	if key.bastion != (endpoint{}) {
		// The bastion connection has its own dial budget and is shared by
		// every host behind it.
		b := key.bastion
		via = " via bastion " + b.String()
		bc, err := s.ride(b)
		if err != nil {
			kind := KindOf(err)
			var te *Error
			if errors.As(err, &te) {
				err = te.Err
			}
			return fail(kind, fmt.Errorf("bastion %s: %w", b, err))
		}
		bastion = bc
		// A new connection carries the ride until it closes; a failed dial
		// ends it here.
		defer func() {
			if bastion != nil {
				bastion.release()
			}
		}()
	}

	// A host behind a bastion takes its slot only once the bastion is up,
	// so dials waiting for a bastion never hold the slots it needs.
	s.dialsQueued.Add(1)
	select {
	case s.dials <- struct{}{}:
		s.dialsQueued.Add(-1)
	case <-s.ctx.Done():
		s.dialsQueued.Add(-1)
		return fail(KindUnreachable, ErrClosed)
	}
	defer func() { <-s.dials }()

	// One budget covers TCP connect (or the bastion's tunnel) and handshake.
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.DialTimeout)
	defer cancel()
	var raw net.Conn
	if bastion != nil {
		raw, err = bastion.client.DialContext(ctx, "tcp", t.Addr)
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
					s.opts.OnTrust(hostname, ssh.FingerprintSHA256(plainKey(k)))
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
			return fail(KindUnreachable, fmt.Errorf("handshake%s %w after %v", via, errHandshakeTimedOut, s.opts.DialTimeout))
		}
		return fail(KindUnreachable, fmt.Errorf("handshake%s: %w", via, err))
	}
	s.handshakes.Add(1)
	c := &conn{
		key:    key,
		client: ssh.NewClient(cc, chans, reqs),
		sem:    make(chan struct{}, s.opts.MaxSessionsPerHost),
		kills:  make(chan struct{}, killSlots),
		done:   make(chan struct{}),
		via:    bastion,
	}
	bastion = nil // handed over to c
	return c, nil
}

// authMethods builds, in order: the user certificate, the identity file
// and the agent keys (one publickey method, since the library tries only
// the first of each kind), then the password. The returned func releases
// the agent connection.
func (s *SSH) authMethods(e endpoint) ([]ssh.AuthMethod, func(), error) {
	var identity ssh.Signer
	if e.IdentityFile != "" {
		var err error
		if identity, err = s.ids.signer(e.IdentityFile, e.PassphraseEnv); err != nil {
			return nil, nil, err
		}
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
	// The certificate goes first and its plain key after it, as OpenSSH
	// offers them: a host may accept either.
	var signers []ssh.Signer
	cert, err := certSigner(e, identity, agentSigners)
	if err != nil {
		closeAgent()
		return nil, nil, err
	}
	if cert != nil {
		signers = append(signers, cert)
	}
	if identity != nil {
		signers = append(signers, identity)
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
