package activities

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/pkg/sftp"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// FilesInput asks for one file op (push, repair, logs) on one registered
// process on one host. Files are references into the content store, never
// contents.
type FilesInput struct {
	RequestID string         `json:"request_id"`
	Op        proc.OpType    `json:"op_type"`
	Target    proc.Target    `json:"target"`
	Process   proc.ProcessID `json:"process"`
	Spec      proc.Spec      `json:"spec"`
	Files     proc.FileOp    `json:"files"`
}

// FilesOutput is the op's result and the paths it wrote.
type FilesOutput struct {
	Result  proc.HostResult `json:"result"`
	Written []string        `json:"written,omitempty"`
}

// HostFiles runs one file op on one host over SFTP, as the spec's account.
// Like HostOp, a host's trouble is a result code, never an error.
func (a *Activities) HostFiles(ctx context.Context, in FilesInput) (FilesOutput, error) {
	host, ok := a.Inventory.Lookup(in.Target.HostID())
	if !ok {
		return FilesOutput{Result: proc.Fail(proc.CodeUnknownHost, "host bk_cloud_id=%d ip=%s is not in the inventory", in.Target.CloudID, in.Target.IP)}, nil
	}
	if host.Transport == inventory.TransportWinRM {
		return FilesOutput{Result: proc.Fail(proc.CodeBadSpec, "%s is a WinRM host: drover transfers files (config push, repair, logs) over SFTP to SSH hosts only", in.Target.IP)}, nil
	}
	if a.Files == nil {
		return FilesOutput{Result: proc.Fail(proc.CodeInternal, "this worker has no file transport")}, nil
	}
	defer keepAlive(ctx)()
	spec := policies.WithDefaults(in.Spec)
	switch in.Op {
	case proc.OpPushConfig:
		return a.push(ctx, host, spec.Account, in.Files.Files, "files")
	case proc.OpRepairConfig:
		return a.repair(ctx, host, spec)
	case proc.OpLogs:
		return FilesOutput{Result: a.logs(ctx, host, spec, in.Files)}, nil
	}
	return FilesOutput{Result: proc.Fail(proc.CodeBadOpType, "op_type %d is not a file op", int(in.Op))}, nil
}

// push writes files on host as account: every path is checked first, then
// each file goes to a temporary name in its own directory, is fsynced and
// renamed into place, and its md5 is read back after the rename. A failure
// before the renames leaves every old file as it was and removes the
// temporary files. field names the request's list, for messages.
func (a *Activities) push(ctx context.Context, host inventory.Host, account string, files []proc.PushFile, field string) (FilesOutput, error) {
	for i, f := range files {
		if f.Content.Size > proc.MaxFileSize {
			return FilesOutput{Result: proc.Fail(proc.CodeBadSpec, "field %s[%d]: %d bytes is over the limit of %d", field, i, f.Content.Size, proc.MaxFileSize)}, nil
		}
	}
	s, err := a.Files.OpenFiles(ctx, host, account)
	if err != nil {
		return FilesOutput{Result: transportFailure(err)}, nil
	}
	defer func() { _ = s.Close() }()
	for i, f := range files {
		if r := checkTarget(s, f.Path, fmt.Sprintf("%s[%d].path", field, i)); r != nil {
			return FilesOutput{Result: *r}, nil
		}
	}
	temps := make([]string, 0, len(files))
	cleanup := func() { a.removeTemps(ctx, host, account, s, temps) }
	for _, f := range files {
		removeStaleTemps(s, f.Path)
		tmp, err := a.writeTemp(ctx, s, f)
		if tmp != "" {
			temps = append(temps, tmp)
		}
		if err != nil {
			cleanup()
			return FilesOutput{Result: sftpFailure(ctx, "write "+f.Path, err)}, nil
		}
	}
	var written []string
	for i, f := range files {
		if err := s.PosixRename(temps[i], f.Path); err != nil {
			temps = temps[i:]
			cleanup()
			r := sftpFailure(ctx, "rename into "+f.Path, err)
			if len(written) > 0 {
				r.Message += fmt.Sprintf(" (already in place: %s)", strings.Join(written, ", "))
			}
			return FilesOutput{Result: r, Written: written}, nil
		}
		written = append(written, f.Path)
	}
	for _, f := range files {
		sum, err := remoteMD5(s, f.Path)
		if err != nil {
			return FilesOutput{Result: sftpFailure(ctx, "read back "+f.Path, err), Written: written}, nil
		}
		if sum != f.Content.MD5 {
			return FilesOutput{Result: proc.Fail(proc.CodeCommandFailed, "%s has md5 %s after the rename, want %s", f.Path, sum, f.Content.MD5), Written: written}, nil
		}
	}
	msg := make([]string, len(files))
	for i, f := range files {
		msg[i] = fmt.Sprintf("%s (md5 %s, mode %04o)", f.Path, f.Content.MD5, f.Mode)
	}
	return FilesOutput{Result: proc.HostResult{Code: proc.CodeSuccess, Message: "pushed " + strings.Join(msg, ", ")}, Written: written}, nil
}

// checkTarget refuses what a push must not write: a path whose directory
// is missing, and a path that is not a regular file: a symlink (it may point
// out of the directory), a directory or a device.
func checkTarget(s *transport.FileSession, p, field string) *proc.HostResult {
	fail := func(format string, args ...any) *proc.HostResult {
		r := proc.Fail(proc.CodeBadSpec, "field %s: %s", field, fmt.Sprintf(format, args...))
		return &r
	}
	dir := path.Dir(p)
	st, err := s.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail("directory %s does not exist on this host", dir)
	case err != nil:
		r := proc.Fail(proc.CodeCommandFailed, "field %s: stat %s: %v", field, dir, err)
		return &r
	case !st.IsDir():
		return fail("%s is not a directory", dir)
	}
	lst, err := s.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		r := proc.Fail(proc.CodeCommandFailed, "field %s: stat %s: %v", field, p, err)
		return &r
	case lst.Mode()&fs.ModeSymlink != 0:
		target, _ := s.ReadLink(p)
		if t := resolveLink(dir, target); !inside(dir, t) {
			return fail("%s is a symlink to %s, outside %s: refused", p, t, dir)
		}
		return fail("%s is a symlink (to %s): drover replaces only regular files", p, target)
	case !lst.Mode().IsRegular():
		return fail("%s is not a regular file (%v)", p, lst.Mode().Type())
	}
	return nil
}

// resolveLink is a symlink's target as an absolute, cleaned path.
func resolveLink(dir, target string) string {
	if !path.IsAbs(target) {
		target = path.Join(dir, target)
	}
	return path.Clean(target)
}

// inside reports whether p lies in directory dir itself.
func inside(dir, p string) bool { return path.Dir(p) == path.Clean(dir) }

// tempPrefix names a file's temporary copies: hidden, next to it, and
// recognisable as drover's own so a later push removes one a lost
// connection left behind.
func tempPrefix(p string) string { return path.Join(path.Dir(p), "."+path.Base(p)+".drover-") }

const tempSuffix = ".tmp"

// writeTemp writes f's content to a new temporary file next to f.Path,
// with f's mode, and fsyncs it. It returns the temporary name once the
// file exists, so the caller can remove it on failure.
func (a *Activities) writeTemp(ctx context.Context, s *transport.FileSession, f proc.PushFile) (string, error) {
	src, err := a.Store.Open(ctx, f.Content)
	if err != nil {
		return "", storeError{err}
	}
	defer src.Close()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := tempPrefix(f.Path) + hex.EncodeToString(rnd[:]) + tempSuffix
	dst, err := s.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return "", err
	}
	mode := f.Mode
	if mode == 0 {
		mode = 0o644
	}
	_, err = io.Copy(dst, storeReader{src})
	if err == nil {
		err = dst.Chmod(fs.FileMode(mode))
	}
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return tmp, err
}

// storeError is the content store failing, not the host: drover's own
// trouble (9199), whatever the transfer had done.
type storeError struct{ err error }

func (e storeError) Error() string { return e.err.Error() }
func (e storeError) Unwrap() error { return e.err }

// storeReader marks the content store's read errors as its own.
type storeReader struct{ r io.Reader }

func (s storeReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = storeError{err}
	}
	return n, err
}

// removeStaleTemps removes temporary copies of p an earlier, interrupted
// push left: only names drover itself makes.
func removeStaleTemps(s *transport.FileSession, p string) {
	entries, err := s.ReadDir(path.Dir(p))
	if err != nil {
		return
	}
	prefix := path.Base(tempPrefix(p))
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, prefix) && strings.HasSuffix(n, tempSuffix) && e.Mode().IsRegular() {
			_ = s.Remove(path.Join(path.Dir(p), n))
		}
	}
}

// removeTemps removes the temporary files of a failed push. When the
// session is what failed (a dropped connection), a new one is opened for
// it: the old file stays and no temporary file is left behind.
func (a *Activities) removeTemps(ctx context.Context, host inventory.Host, account string, s *transport.FileSession, temps []string) {
	var left []string
	for _, t := range temps {
		if err := s.Remove(t); err != nil && !errors.Is(err, fs.ErrNotExist) {
			left = append(left, t)
		}
	}
	if len(left) == 0 {
		return
	}
	// The host may be back only a moment later (a blip, an sshd
	// restart): try again until the cleanup's own deadline.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), policies.FileCleanupTimeout)
	defer cancel()
	for {
		s2, err := a.Files.OpenFiles(cctx, host, account)
		if err == nil {
			for _, t := range left {
				_ = s2.Remove(t)
			}
			_ = s2.Close()
			return
		}
		select {
		case <-cctx.Done():
			return // removed by the next push to this path
		case <-time.After(time.Second):
		}
	}
}

// remoteMD5 reads a file on the host and returns its md5.
func remoteMD5(s *transport.FileSession, p string) (string, error) {
	f, err := s.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := md5.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// sftpFailure maps a failed SFTP step to its per-host code: the host's
// refusal (permission denied, no space) is 65535 with its words; a session
// that died is 117, the host unreachable mid-transfer.
func sftpFailure(ctx context.Context, what string, err error) proc.HostResult {
	var se *sftp.StatusError
	switch {
	case transport.KindOf(err) != 0:
		return transportFailure(err)
	case errors.As(err, &se), errors.Is(err, fs.ErrPermission), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrExist):
		return proc.Fail(proc.CodeCommandFailed, "%s: %v", what, err)
	case ctx.Err() != nil:
		return proc.Fail(proc.CodeTimeout, "%s: %v", what, context.Cause(ctx))
	case errors.As(err, new(storeError)):
		return proc.Fail(proc.CodeInternal, "%s: %v", what, err)
	}
	return proc.Fail(proc.CodeUnreachable, "%s: connection lost during the transfer (the old file is unchanged): %v", what, err)
}

// repair restores every drifted configmap file that has a source, and
// reports the drifted ones without a source as not repairable.
func (a *Activities) repair(ctx context.Context, host inventory.Host, spec proc.Spec) (FilesOutput, error) {
	s, err := a.Files.OpenFiles(ctx, host, spec.Account)
	if err != nil {
		return FilesOutput{Result: transportFailure(err)}, nil
	}
	var fix []proc.PushFile
	var cannot []string
	for _, c := range spec.ConfigMap {
		if c.MD5 == "" {
			continue // no expected checksum: never drifted
		}
		sum, err := remoteMD5(s, c.Path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			_ = s.Close()
			return FilesOutput{Result: sftpFailure(ctx, "read "+c.Path, err)}, nil
		}
		if sum == c.MD5 {
			continue
		}
		if c.Source != nil && c.Source.MD5 == "" {
			// Named by a request by its sha256 alone: the store knows the rest.
			ref, err := a.Store.Stat(ctx, c.Source.SHA256)
			if err != nil {
				cannot = append(cannot, fmt.Sprintf("%s: its source %v", c.Path, err))
				continue
			}
			c.Source = &ref
		}
		switch {
		case c.Source == nil:
			cannot = append(cannot, c.Path+" has no source to restore it from (push it with starter config push)")
		case c.Source.MD5 != c.MD5:
			cannot = append(cannot, fmt.Sprintf("%s: its source has md5 %s, not the registered %s", c.Path, c.Source.MD5, c.MD5))
		default:
			fix = append(fix, proc.PushFile{Path: c.Path, Mode: c.Mode, Content: *c.Source})
		}
	}
	_ = s.Close()
	out := FilesOutput{Result: proc.HostResult{Code: proc.CodeSuccess, Message: "no config drift"}}
	if len(fix) > 0 {
		out, _ = a.push(ctx, host, spec.Account, fix, "configmap")
		if out.Result.Code == proc.CodeSuccess {
			out.Result.Message = "restored " + strings.Join(out.Written, ", ")
		}
	}
	if len(cannot) > 0 && out.Result.Code == proc.CodeSuccess {
		msg := "not repaired: " + strings.Join(cannot, "; ")
		if len(out.Written) > 0 {
			msg = out.Result.Message + "; " + msg
		}
		out.Result = proc.Fail(proc.CodeBadSpec, "%s", msg)
	}
	return out, nil
}
