package main

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/transport"
)

// bareRunner is a transport.Runner over bare x/crypto/ssh connections, one
// per address, dialled on first use and kept: no pool logic, no sudo, no
// host-side watchdog, nothing but a session per command; with sessions,
// at most that many on one connection at once, as sshd's MaxSessions
// needs of hosts that share an address.
type bareRunner struct {
	cfg      *ssh.ClientConfig
	sessions int
	mu       sync.Mutex
	conns    map[string]*bareConn
}

type bareConn struct {
	once sync.Once
	c    *ssh.Client
	err  error
	sem  chan struct{}
}

func (r *bareRunner) conn(addr string) (*bareConn, error) {
	r.mu.Lock()
	bc, ok := r.conns[addr]
	if !ok {
		bc = &bareConn{}
		if r.sessions > 0 {
			bc.sem = make(chan struct{}, r.sessions)
		}
		r.conns[addr] = bc
	}
	r.mu.Unlock()
	bc.once.Do(func() { bc.c, bc.err = ssh.Dial("tcp", addr, r.cfg) })
	return bc, bc.err
}

func (r *bareRunner) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, bc := range r.conns {
		if bc.c != nil {
			bc.c.Close()
		}
	}
	r.conns = map[string]*bareConn{}
}

// Run runs cmd's script and arguments with sh as the login user over
// host's connection.
func (r *bareRunner) Run(_ context.Context, host inventory.Host, cmd transport.Command) (transport.Result, error) {
	addr := host.DialAddress()
	fail := func(err error) (transport.Result, error) {
		return transport.Result{}, &transport.Error{Kind: transport.KindUnreachable, Host: addr, Err: err}
	}
	bc, err := r.conn(addr)
	if err != nil {
		return fail(err)
	}
	if bc.sem != nil {
		bc.sem <- struct{}{}
		defer func() { <-bc.sem }()
	}
	sess, err := bc.c.NewSession()
	if err != nil {
		return fail(err)
	}
	defer sess.Close()
	var stdout, stderr bytes.Buffer
	sess.Stdout, sess.Stderr = &stdout, &stderr
	code := 0
	if err := sess.Run(transport.ShellCommand(cmd)); err != nil {
		var exit *ssh.ExitError
		if !errors.As(err, &exit) {
			return fail(err)
		}
		code = exit.ExitStatus()
	}
	return transport.Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: code}, nil
}
