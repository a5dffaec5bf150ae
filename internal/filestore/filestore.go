// Package filestore is drover's content store: a directory (files_dir) the
// starter and the worker share, holding file contents by their sha256. A
// workflow carries only a proc.FileRef; whoever needs the bytes reads them
// here, so contents never enter a workflow's history.
package filestore

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-sh/drover/proc"
)

// Store is a content store rooted at Dir.
type Store struct {
	Dir string
}

// ErrNotConfigured means files_dir is not set.
var ErrNotConfigured = errors.New("files_dir is not set: file ops need a content store shared by the starter and the worker (files_dir, DROVER_FILES_DIR, --files-dir)")

// ErrTooLarge is content over proc.MaxFileSize.
var ErrTooLarge = fmt.Errorf("is larger than the limit of %d bytes (64 MiB)", proc.MaxFileSize)

// ValidSHA256 reports whether s is a sha256 in lower-case hex, the only
// form a store path is built from.
func ValidSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (s Store) path(sum string) string { return filepath.Join(s.Dir, "sha256", sum[:2], sum) }

// PutFile stores a local file. Its size is checked before it is read.
func (s Store) PutFile(name string) (proc.FileRef, error) {
	f, err := os.Open(name)
	if err != nil {
		return proc.FileRef{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return proc.FileRef{}, err
	}
	if !st.Mode().IsRegular() {
		return proc.FileRef{}, fmt.Errorf("is not a regular file")
	}
	if st.Size() > proc.MaxFileSize {
		return proc.FileRef{}, ErrTooLarge
	}
	return s.Put(f, proc.MaxFileSize)
}

// Put stores what r yields, at most max bytes (more is refused, and
// nothing is kept). The file is written under a temporary name and renamed,
// so a reader never sees part of one; contents may be secret, so the store
// is readable by its owner only.
func (s Store) Put(r io.Reader, max int64) (proc.FileRef, error) {
	if s.Dir == "" {
		return proc.FileRef{}, ErrNotConfigured
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, "sha256"), 0o700); err != nil {
		return proc.FileRef{}, err
	}
	tmp, err := os.CreateTemp(filepath.Join(s.Dir, "sha256"), ".put-*")
	if err != nil {
		return proc.FileRef{}, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	sh, m := sha256.New(), md5.New()
	n, err := io.Copy(io.MultiWriter(tmp, sh, m), io.LimitReader(r, max+1))
	if err != nil {
		return proc.FileRef{}, err
	}
	if n > max {
		return proc.FileRef{}, ErrTooLarge
	}
	if err := tmp.Sync(); err != nil {
		return proc.FileRef{}, err
	}
	ref := proc.FileRef{SHA256: hex.EncodeToString(sh.Sum(nil)), MD5: hex.EncodeToString(m.Sum(nil)), Size: n}
	dst := s.path(ref.SHA256)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return proc.FileRef{}, err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return proc.FileRef{}, err
	}
	return ref, nil
}

// Stat returns the reference of stored content by its sha256.
func (s Store) Stat(sum string) (proc.FileRef, error) {
	if s.Dir == "" {
		return proc.FileRef{}, ErrNotConfigured
	}
	if !ValidSHA256(sum) {
		return proc.FileRef{}, fmt.Errorf("%q is not a sha256 in lower-case hex", sum)
	}
	f, err := os.Open(s.path(sum))
	if err != nil {
		return proc.FileRef{}, fmt.Errorf("no content %s in files_dir %s", sum, s.Dir)
	}
	defer f.Close()
	sh, m := sha256.New(), md5.New()
	n, err := io.Copy(io.MultiWriter(sh, m), f)
	if err != nil {
		return proc.FileRef{}, err
	}
	if got := hex.EncodeToString(sh.Sum(nil)); got != sum {
		return proc.FileRef{}, fmt.Errorf("content %s in files_dir is damaged (its sha256 is %s)", sum, got)
	}
	return proc.FileRef{SHA256: sum, MD5: hex.EncodeToString(m.Sum(nil)), Size: n}, nil
}

// Open opens stored content for reading. The reader checks the content
// against ref as it is read: a damaged or replaced file fails at its end
// rather than being passed on.
func (s Store) Open(ref proc.FileRef) (io.ReadCloser, error) {
	if s.Dir == "" {
		return nil, ErrNotConfigured
	}
	if !ValidSHA256(ref.SHA256) {
		return nil, fmt.Errorf("%q is not a sha256 in lower-case hex", ref.SHA256)
	}
	if ref.Size > proc.MaxFileSize {
		return nil, fmt.Errorf("content %s %v", ref.SHA256, ErrTooLarge)
	}
	f, err := os.Open(s.path(ref.SHA256))
	if err != nil {
		return nil, fmt.Errorf("content %s is not in files_dir %s: %w", ref.SHA256, s.Dir, err)
	}
	st, err := f.Stat()
	if err != nil || st.Size() != ref.Size {
		f.Close()
		return nil, fmt.Errorf("content %s in files_dir %s is not %d bytes", ref.SHA256, s.Dir, ref.Size)
	}
	return &checked{f: f, ref: ref, sha: sha256.New()}, nil
}

type checked struct {
	f   *os.File
	ref proc.FileRef
	sha hash.Hash
}

func (c *checked) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	c.sha.Write(p[:n])
	if err == io.EOF && hex.EncodeToString(c.sha.Sum(nil)) != c.ref.SHA256 {
		return n, fmt.Errorf("content %s in files_dir changed while it was read", c.ref.SHA256)
	}
	return n, err
}

func (c *checked) Close() error { return c.f.Close() }

// Remove deletes stored content, as a reader of a log tail does once it
// has printed it.
func (s Store) Remove(sum string) error {
	if !ValidSHA256(sum) || s.Dir == "" {
		return nil
	}
	err := os.Remove(s.path(sum))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// ReadAll reads small stored content whole (a log tail).
func (s Store) ReadAll(ref proc.FileRef) ([]byte, error) {
	r, err := s.Open(ref)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, r); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}
