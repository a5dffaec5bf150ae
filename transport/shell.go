package transport

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ShellQuote returns s as one POSIX sh word that the shell reads back as
// exactly s. Words made only of characters no shell treats specially are
// returned as they are, for readable command lines; everything else is
// single-quoted, with each ' written as '\”.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, needsQuote) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func needsQuote(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	// '=' is left out on purpose: a leading NAME=value word is an assignment.
	return !strings.ContainsRune("_-+.,/:@%", r)
}

// startMarker is written to stderr by the wrapper once sh, and sudo when
// used, are running, followed by the process group to kill on cancel. Its
// absence after the command ends means the script never started.
const startMarker = "__drover_started__"

// sudoPrefix is the command prefix that switches to account, or "" when the
// login user already is that account.
func sudoPrefix(loginUser, account string) string {
	if account == "" || account == loginUser {
		return ""
	}
	return "sudo -n -u " + ShellQuote(account) + " -- "
}

// AccountPrefix is the prefix a command gets to run as account, as a plan
// shows it; "" when the login user already is that account.
func AccountPrefix(loginUser, account string) string { return sudoPrefix(loginUser, account) }

// remoteCommand is the exec request for cmd: never a login shell, the
// script and each of its arguments one quoted word, run by the wrapper. A
// positive deadline arms the host-side watchdog, in whole seconds.
func remoteCommand(loginUser string, cmd Command, deadline time.Duration) string {
	secs := "''"
	if deadline > 0 {
		secs = strconv.FormatInt(int64((deadline+time.Second-1)/time.Second), 10)
	}
	return sudoPrefix(loginUser, cmd.Account) + "sh -c " + ShellQuote(wrapper) + " sh " + secs + " " + ShellQuote(cmd.Script) + " " + scriptArg0 + shellArgs(cmd.Args)
}

// killCommand stops process group pgid left by a cancelled command. root
// can signal every member; anyone else must be the account that owns them.
func killCommand(loginUser string, cmd Command, pgid int) string {
	prefix := ""
	if loginUser != "root" {
		prefix = sudoPrefix(loginUser, cmd.Account)
	}
	return prefix + ShellCommand(Command{Script: killScript, Args: []string{strconv.Itoa(pgid)}})
}

// maxOutput caps each of stdout and stderr kept from one command.
const maxOutput = 64 << 10

// capBuffer keeps the first max bytes written and discards the rest while
// still reporting success, so the remote side is drained and never blocks.
// It is safe for concurrent use: a cancelled command's output is read while
// the session may still be writing.
type capBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *capBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf)
}

// markerStderr splits the wrapper's start marker line out of stderr. Bytes
// before it (sudo's or the login shell's complaints) are kept as stderr;
// the marker line itself is removed.
type markerStderr struct {
	mu      sync.Mutex
	seenCh  chan struct{} // closed when the marker arrives
	seen    bool
	gaveUp  bool // too much stderr arrived before any marker
	pgid    int
	pending []byte // stderr before the marker, searched for it
	out     capBuffer
}

func newMarkerStderr() *markerStderr {
	return &markerStderr{out: capBuffer{max: maxOutput}, seenCh: make(chan struct{})}
}

// maxMarkerLine bounds the marker line: the marker, a space, a pid.
const maxMarkerLine = len(startMarker) + 32

func (m *markerStderr) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen || m.gaveUp {
		return m.out.Write(p)
	}
	m.pending = append(m.pending, p...)
	for off := 0; ; {
		i := bytes.Index(m.pending[off:], []byte(startMarker))
		if i < 0 {
			break
		}
		i += off
		if i > 0 && m.pending[i-1] != '\n' {
			off = i + 1
			continue
		}
		nl := bytes.IndexByte(m.pending[i:], '\n')
		if nl < 0 {
			// The rest of the marker line has not arrived yet.
			return len(p), nil
		}
		m.pgid, _ = strconv.Atoi(strings.TrimSpace(string(m.pending[i+len(startMarker) : i+nl])))
		m.seen = true
		close(m.seenCh)
		_, _ = m.out.Write(m.pending[:i])
		_, _ = m.out.Write(m.pending[i+nl+1:])
		m.pending = nil
		return len(p), nil
	}
	// This much stderr without a marker is not the wrapper starting: stop
	// buffering and searching, keep the start of it as plain stderr.
	if len(m.pending) > maxOutput+maxMarkerLine {
		_, _ = m.out.Write(m.pending)
		m.pending = nil
		m.gaveUp = true
	}
	return len(p), nil
}

// started reports whether the wrapper announced itself, and the process
// group it reported (0 when unknown).
func (m *markerStderr) started() (bool, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen, m.pgid
}

// Bytes is stderr without the marker line.
func (m *markerStderr) Bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen {
		return m.out.Bytes()
	}
	out := append(m.out.Bytes(), m.pending...)
	return out[:min(len(out), maxOutput)]
}
