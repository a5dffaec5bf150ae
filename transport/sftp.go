package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/drover-sh/drover/inventory"
)

// FileOpener opens file sessions on hosts: SFTP on the host's pooled SSH
// connection, as an account. Paths reach the host as SFTP requests, never
// through a shell.
type FileOpener interface {
	OpenFiles(ctx context.Context, host inventory.Host, account string) (*FileSession, error)
}

// FileSession is an SFTP client on one session of a pooled connection.
// Close it to give the session back.
type FileSession struct {
	*sftp.Client
	close func()
}

// Close ends the SFTP session and frees its slot on the connection.
func (f *FileSession) Close() error {
	f.close()
	return nil
}

var _ FileOpener = (*SSH)(nil)

// OpenFiles opens an SFTP session to host as account (empty: the login
// user). Errors are *Error: KindSudo when sudo to the account is refused.
// ctx bounds the whole session: when it ends, the session is closed and any
// transfer on it fails.
func (s *SSH) OpenFiles(ctx context.Context, host inventory.Host, account string) (*FileSession, error) {
	addr := host.DialAddress()
	if host.Transport != "" && host.Transport != inventory.TransportSSH {
		return nil, &Error{Kind: KindUnsupported, Host: addr, Err: fmt.Errorf("transport %q is not ssh", host.Transport)}
	}
	key := keyFor(host)
	for attempt := 0; ; attempt++ {
		c, err := s.get(ctx, key)
		if err != nil {
			return nil, err
		}
		fs, err, fresh := s.openFilesOn(ctx, c, host.User, account)
		// fresh: the pooled connection was found dead before anything was
		// sent; one more try on a new connection is safe.
		if fresh && attempt == 0 && ctx.Err() == nil {
			continue
		}
		return fs, err
	}
}

func (s *SSH) openFilesOn(ctx context.Context, c *conn, loginUser, account string) (_ *FileSession, _ error, fresh bool) {
	addr := c.key.target.Addr
	fail := func(kind Kind, err error) *Error { return &Error{Kind: kind, Host: addr, Err: err} }
	select {
	case c.sem <- struct{}{}:
	case <-c.done:
		return nil, fail(KindUnreachable, fmt.Errorf("connection lost; nothing sent: %w", errConnClosed)), true
	case <-ctx.Done():
		return nil, fail(KindTimeout, fmt.Errorf("no free session before the deadline; nothing sent: %w", ctx.Err())), false
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			c.lastUsed.Store(time.Now().UnixNano())
			<-c.sem
		})
	}
	sess, err := openSession(ctx, c)
	if err != nil {
		release()
		var refused *ssh.OpenChannelError
		switch {
		case ctx.Err() != nil && !errors.Is(err, errConnClosed):
			return nil, fail(KindUnreachable, fmt.Errorf("host opened no session before the deadline: %w", ctx.Err())), false
		case errors.As(err, &refused):
			return nil, fail(KindUnreachable, fmt.Errorf("session refused: %w", err)), false
		}
		s.evict(c)
		return nil, fail(KindUnreachable, fmt.Errorf("connection lost; nothing sent: %w", err)), true
	}
	stdin, err1 := sess.StdinPipe()
	stdout, err2 := sess.StdoutPipe()
	stderr := &capBuffer{max: 4096}
	sess.Stderr = stderr
	if err := errors.Join(err1, err2); err != nil {
		sess.Close()
		release()
		return nil, fail(KindUnreachable, err), false
	}
	// Closing the session unblocks every SFTP call waiting on the host:
	// a frozen host or an ended op must not hold the worker.
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	s.execs.Add(1)
	sudo := sudoPrefix(loginUser, account)
	if sudo == "" {
		err = sess.RequestSubsystem("sftp")
	} else {
		err = sess.Start(sudo + ShellCommand(Command{Script: sftpServer}))
	}
	var client *sftp.Client
	if err == nil {
		client, err = sftp.NewClientPipe(stdout, stdin, sftp.UseConcurrentWrites(true))
	}
	if err != nil {
		stop()
		sess.Close()
		release()
		msg := summary(stderr.Bytes())
		switch {
		case ctx.Err() != nil:
			return nil, fail(KindTimeout, fmt.Errorf("sftp session not started before the deadline: %w", ctx.Err())), false
		case sudo != "":
			return nil, fail(KindSudo, fmt.Errorf("sftp-server as %s did not start: %v: %s", account, err, msg)), false
		}
		return nil, fail(KindUnreachable, fmt.Errorf("sftp subsystem did not start: %v: %s", err, msg)), false
	}
	return &FileSession{Client: client, close: func() {
		stop()
		_ = client.Close()
		_ = sess.Close()
		release()
	}}, nil, false
}

// OpenFiles opens a file session over the host's transport. WinRM hosts
// have no SFTP: KindUnsupported.
func (m Multi) OpenFiles(ctx context.Context, host inventory.Host, account string) (*FileSession, error) {
	switch host.Transport {
	case inventory.TransportWinRM:
		return nil, &Error{Kind: KindUnsupported, Host: host.DialAddress(), Err: errors.New("files are not transferred to WinRM hosts")}
	case inventory.TransportSimulated:
		return nil, &Error{Kind: KindUnsupported, Host: host.DialAddress(), Err: errors.New("files are not transferred to simulated hosts")}
	}
	fo, ok := m.SSH.(FileOpener)
	if !ok {
		return nil, &Error{Kind: KindUnsupported, Host: host.DialAddress(), Err: errors.New("no ssh transport configured")}
	}
	return fo.OpenFiles(ctx, host, account)
}

var _ io.Closer = (*FileSession)(nil)
