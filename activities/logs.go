package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// refusal is a log drover will not read: the path's rule, or what is
// there (a symlink out of the directory, no regular file).
type refusal struct{ msg string }

func (r refusal) Error() string { return r.msg }

func refused(format string, args ...any) error { return refusal{fmt.Sprintf(format, args...)} }

// logTail is the end of a log: the file it was read from and its last
// lines, oldest first.
type logTail struct {
	file      string
	lines     []string
	truncated bool // older lines were left out by a bound
}

// readTail reads the last lines of log_path, a file or the newest regular
// file in a directory, reading at most maxRead bytes from its end. A
// symlink is followed only to a regular file in the same directory, never
// out of it. grep, when set, keeps only matching lines.
func readTail(s *transport.FileSession, logPath string, maxRead int64, lines, maxBytes int, grep *regexp.Regexp) (logTail, error) {
	p, err := proc.CheckRemotePath(logPath)
	if err != nil {
		return logTail{}, refused("log_path %s", err)
	}
	st, err := s.Lstat(p)
	if err != nil {
		return logTail{}, err
	}
	if st.IsDir() {
		p, err = newestIn(s, p)
		if err != nil {
			return logTail{}, err
		}
	} else if p, err = followInside(s, p); err != nil {
		return logTail{}, err
	}
	f, err := s.Open(p)
	if err != nil {
		return logTail{}, err
	}
	defer f.Close()
	fst, err := f.Stat()
	if err != nil {
		return logTail{}, err
	}
	off := max(fst.Size()-maxRead, 0)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return logTail{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRead))
	if err != nil {
		return logTail{}, err
	}
	out := logTail{file: p}
	if off > 0 {
		// The first line read is probably the end of a longer one.
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
		out.truncated = true
	}
	all := strings.Split(strings.TrimRight(string(bytes.ToValidUTF8(data, []byte("?"))), "\n"), "\n")
	if len(all) == 1 && all[0] == "" {
		all = nil
	}
	var kept []string
	for _, l := range all {
		l = strings.TrimRight(l, "\r")
		if grep == nil || grep.MatchString(l) {
			kept = append(kept, l)
		}
	}
	if len(kept) > lines {
		kept, out.truncated = kept[len(kept)-lines:], true
	}
	size := 0
	for i := len(kept) - 1; i >= 0; i-- {
		size += len(kept[i]) + 1
		if size > maxBytes {
			kept, out.truncated = kept[i+1:], true
			break
		}
	}
	out.lines = kept
	return out, nil
}

// newestIn is the most recently modified regular file in dir, symlinks
// followed only within dir.
func newestIn(s *transport.FileSession, dir string) (string, error) {
	entries, err := s.ReadDir(dir)
	if err != nil {
		return "", err
	}
	best, bestTime := "", int64(0)
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		mt := e.ModTime().UnixNano()
		if e.Mode()&fs.ModeSymlink != 0 {
			t, err := followInside(s, p)
			if err != nil {
				continue // pointing out of the directory, or nowhere
			}
			st, err := s.Stat(t)
			if err != nil {
				continue
			}
			p, mt = t, st.ModTime().UnixNano()
		} else if !e.Mode().IsRegular() {
			continue
		}
		if best == "" || mt > bestTime {
			best, bestTime = p, mt
		}
	}
	if best == "" {
		return "", refused("log directory %s holds no regular file", dir)
	}
	return best, nil
}

// followInside resolves p when it is a symlink: its target must be a
// regular file in p's own directory.
func followInside(s *transport.FileSession, p string) (string, error) {
	st, err := s.Lstat(p)
	if err != nil {
		return "", err
	}
	if st.Mode()&fs.ModeSymlink == 0 {
		if !st.Mode().IsRegular() {
			return "", refused("%s is not a regular file", p)
		}
		return p, nil
	}
	target, err := s.ReadLink(p)
	if err != nil {
		return "", err
	}
	dir := path.Dir(p)
	t := resolveLink(dir, target)
	if !inside(dir, t) {
		return "", refused("%s is a symlink to %s, outside %s: not followed", p, t, dir)
	}
	tst, err := s.Lstat(t)
	if err != nil {
		return "", err
	}
	if !tst.Mode().IsRegular() {
		return "", refused("%s is a symlink to %s, which is not a regular file: not followed", p, t)
	}
	return t, nil
}

// logs reads the tail of the process's log. A tail that fits LogInlineMax
// comes back in the result itself, as the default tail (20 lines, at most
// 2 KB) does; a longer one goes to the content store, and the result
// carries its reference.
func (a *Activities) logs(ctx context.Context, host inventory.Host, spec proc.Spec, op proc.FileOp) proc.HostResult {
	if spec.LogPath == "" {
		return proc.Fail(proc.CodeBadSpec, "process %s has no log_path", spec.ProcName)
	}
	var grep *regexp.Regexp
	if op.Grep != "" {
		re, err := regexp.Compile(op.Grep)
		if err != nil {
			return proc.Fail(proc.CodeBadSpec, "field grep: %v", err)
		}
		grep = re
	}
	n, maxBytes := op.Tail, policies.LogReadMax
	if n <= 0 {
		n, maxBytes = policies.LogTailDefault, policies.LogTailDefaultBytes
	}
	s, err := a.Files.OpenFiles(ctx, host, spec.Account)
	if err != nil {
		return transportFailure(err)
	}
	defer func() { _ = s.Close() }()
	tail, err := readTail(s, spec.LogPath, policies.LogReadMax, min(n, policies.LogTailMax), maxBytes, grep)
	if err != nil {
		return logFailure(ctx, spec.LogPath, err)
	}
	text := strings.Join(tail.lines, "\n")
	if text != "" {
		text += "\n"
	}
	lc := proc.LogContent{Path: tail.file, Lines: len(tail.lines), Truncated: tail.truncated, Text: text}
	r := proc.HostResult{Code: proc.CodeSuccess, Message: fmt.Sprintf("%d lines of %s", len(tail.lines), tail.file)}
	r.Content = proc.EncodeContent(lc)
	if encoded, _ := json.Marshal(r.Content); len(encoded) <= policies.LogInlineMax {
		return r
	}
	ref, err := a.Store.PutTail(ctx, text, policies.LogReadMax*2)
	if err != nil {
		return proc.Fail(proc.CodeInternal, "keep the log tail in the content store: %v", err)
	}
	lc.Text, lc.Tail = "", &ref
	r.Content = proc.EncodeContent(lc)
	return r
}

// logFailure is the code of a log that could not be read: missing or
// refused is the spec's or the host's matter (9107), a lost session 117.
func logFailure(ctx context.Context, logPath string, err error) proc.HostResult {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return proc.Fail(proc.CodeBadSpec, "log_path %s does not exist on this host", logPath)
	case errors.As(err, new(refusal)):
		return proc.Fail(proc.CodeBadSpec, "%v", err)
	}
	return sftpFailure(ctx, "read "+logPath, err)
}

// withLog adds the last lines of the process's log to a start or restart
// that failed its post-check (836) or whose command failed (65535): what an
// operator would ssh in to read first. The log is read as the account, on
// one line, bounded; an unreadable log changes nothing.
func (r *opRun) withLog(out HostOpOutput) HostOpOutput {
	c := out.Result.Code
	if (c != proc.CodePostCheck && c != proc.CodeCommandFailed) || r.spec.LogPath == "" || r.a.Files == nil ||
		r.host.Transport == inventory.TransportWinRM {
		return out
	}
	ctx, cancel := context.WithTimeout(r.ctx, policies.FailureLogTimeout)
	defer cancel()
	s, err := r.a.Files.OpenFiles(ctx, r.host, r.spec.Account)
	if err != nil {
		return out
	}
	defer func() { _ = s.Close() }()
	tail, err := readTail(s, r.spec.LogPath, 64<<10, policies.FailureLogLines, policies.FailureLogBytes, nil)
	if err != nil || len(tail.lines) == 0 {
		return out
	}
	out.Result.Message = fmt.Sprintf("%s; log %s: %s", out.Result.Message, tail.file, strings.Join(tail.lines, " | "))
	return out
}
