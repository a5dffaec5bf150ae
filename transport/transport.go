// Package transport runs shell scripts on hosts. Everything above it speaks
// to a Runner and never learns which protocol a host uses.
package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drover-sh/drover/inventory"
)

// Shell names the language of a Command's Script. Each transport runs
// only its own: SSH hosts run sh, WinRM hosts run bat and ps1.
type Shell string

const (
	ShellSh         Shell = "sh"  // POSIX sh, run as `sh -c`; the zero Shell means this
	ShellCmd        Shell = "bat" // one cmd.exe command line, run as `cmd /c`
	ShellPowerShell Shell = "ps1" // Windows PowerShell source, passed as -EncodedCommand
)

// Command is one script to run on a host, with its arguments.
type Command struct {
	// Name is the script's name (e.g. "control") when it is one of
	// drover's script files; "" for a command line of no file. A runner
	// that simulates hosts may answer a command by Name and Args.
	Name string
	// Script is source in Shell's language: POSIX sh (never a login
	// shell), one cmd.exe line, or PowerShell. Its text is fixed: what
	// the command is about comes in Args.
	Script string
	// Args are Script's positional parameters, passed as data: $1... of
	// `sh -c SCRIPT drover ARG...`, or the values of a PowerShell
	// script's param block. A bat command line takes none.
	Args []string
	// Shell is the Script's language; empty means ShellSh.
	Shell Shell
	// Account is the OS account to run as; empty or equal to the login user
	// means no sudo.
	Account string
	// Timeout bounds connecting and the command on its host. Over SSH the
	// wait for one of a pooled connection's sessions, behind the worker's
	// own commands to that host, does not count: the caller's context
	// bounds it, and the pool's keepalive a dead host. Zero means the
	// caller's context alone bounds the command.
	Timeout time.Duration
	// Bounded says the script ends by itself: it only reads the host, or
	// bounds what it runs with a watchdog of its own. An SSH host then arms
	// no watchdog for it, which would cost the host two processes more
	// than a probe's own.
	Bounded bool
}

// Result is what a finished command produced. A non-zero ExitCode is not an
// error: the caller decides what it means.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// shellOf is cmd's Shell with the zero value resolved.
func shellOf(cmd Command) Shell {
	if cmd.Shell == "" {
		return ShellSh
	}
	return cmd.Shell
}

// Runner runs commands on inventory hosts.
type Runner interface {
	Run(ctx context.Context, host inventory.Host, cmd Command) (Result, error)
}

// Connector is a Runner that can establish a host's connection ahead of
// its first command, so that a caller overlaps the handshake with other
// work. Wrappers of a Runner pass it through, or callers never see it.
type Connector interface {
	Connect(ctx context.Context, host inventory.Host) error
}

// Kind classifies transport failures so callers map them to result codes.
type Kind int

const (
	KindUnreachable Kind = iota + 1 // dial, handshake or connection lost
	KindAuth                        // credentials refused or unavailable
	KindHostKey                     // host key or TLS certificate not verified
	KindSudo                        // sudo to the account refused
	KindTimeout                     // the command ran past its timeout
	KindUnsupported                 // the host's transport cannot run this
)

func (k Kind) String() string {
	switch k {
	case KindUnreachable:
		return "unreachable"
	case KindAuth:
		return "auth"
	case KindHostKey:
		return "hostkey"
	case KindSudo:
		return "sudo"
	case KindTimeout:
		return "timeout"
	case KindUnsupported:
		return "unsupported"
	}
	return "unknown"
}

// Error is a classified transport failure.
type Error struct {
	Kind Kind
	Host string // dial address, for messages
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s: %v", e.Host, e.Kind, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the Kind of a transport error, or 0 when err is not one.
func KindOf(err error) Kind {
	var te *Error
	if errors.As(err, &te) {
		return te.Kind
	}
	return 0
}

// Multi runs each command over the transport its host's inventory entry
// names, so nothing above this package knows which protocol a host speaks.
type Multi struct {
	SSH   Runner
	WinRM Runner
	// Simulated answers hosts of transport "simulated".
	Simulated Runner
}

// runner is the Runner of host's transport.
func (m Multi) runner(host inventory.Host) Runner {
	switch host.Transport {
	case inventory.TransportWinRM:
		return m.WinRM
	case inventory.TransportSimulated:
		return m.Simulated
	}
	return m.SSH
}

var (
	_ Runner    = Multi{}
	_ Connector = Multi{}
)

func (m Multi) Run(ctx context.Context, host inventory.Host, cmd Command) (Result, error) {
	r := m.runner(host)
	if r == nil {
		return Result{}, &Error{Kind: KindUnsupported, Host: host.DialAddress(), Err: fmt.Errorf("no %s transport configured", host.Transport)}
	}
	return r.Run(ctx, host, cmd)
}

// Connect connects ahead over the transport host's entry names, when that
// transport can; otherwise there is nothing to do ahead of Run.
func (m Multi) Connect(ctx context.Context, host inventory.Host) error {
	if c, ok := m.runner(host).(Connector); ok {
		return c.Connect(ctx, host)
	}
	return nil
}
