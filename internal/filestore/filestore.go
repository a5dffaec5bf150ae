// Package filestore is drover's content store: pushed files and log tails,
// kept by their sha256 in one bucket that starters, the HTTP server and
// workers share: a directory on one machine (file://), an object store
// across machines (s3://). A workflow carries only a proc.FileRef; whoever
// needs the bytes reads them here, so contents never enter a workflow's
// history.
package filestore

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/s3blob" // s3:// URLs
	"gocloud.dev/gcerrors"

	"github.com/drover-sh/drover/proc"
)

// Store is an open content store. Its zero value has none and refuses
// every call with ErrNotConfigured.
type Store struct{ s *store }

type store struct {
	b     *blob.Bucket
	where Location
	mu    sync.Mutex
	swept time.Time // the last sweep of expired tails
}

// ErrNotConfigured means no content store was opened.
var ErrNotConfigured = errors.New("no content store: file ops need one shared by starters, the HTTP server and workers (content_store or files_dir)")

// ErrTooLarge is content over proc.MaxFileSize.
var ErrTooLarge = fmt.Errorf("is larger than the limit of %d bytes (64 MiB)", proc.MaxFileSize)

// ErrNotFound is content the store does not hold.
var ErrNotFound = errors.New("not in the content store")

// Open opens the store at l. A directory is created, readable by its owner
// only, since contents may be secret; an object store is not contacted
// until it is used (Check asks it).
func Open(ctx context.Context, l Location) (Store, error) {
	var b *blob.Bucket
	var err error
	if l.URL != "" {
		b, err = blob.OpenBucket(ctx, l.URL)
	} else {
		if err := os.MkdirAll(l.Dir, 0o700); err != nil {
			return Store{}, fmt.Errorf("content store %s: %w", l, err)
		}
		// Temporary files next to their objects: a rename from os.TempDir
		// fails across mounts. No sidecar files: the directory holds only
		// contents, as files_dir always did.
		b, err = fileblob.OpenBucket(l.Dir, &fileblob.Options{DirFileMode: 0o700, NoTempDir: true, Metadata: fileblob.MetadataDontWrite})
	}
	if err != nil {
		return Store{}, fmt.Errorf("content store %s: %w", l, err)
	}
	return Store{&store{b: b, where: l}}, nil
}

// Location is where the store is; the zero Location for the zero Store.
func (s Store) Location() Location {
	if s.s == nil {
		return Location{}
	}
	return s.s.where
}

// Check reports whether the store can be reached and read.
func (s Store) Check(ctx context.Context) error {
	if s.s == nil {
		return ErrNotConfigured
	}
	ok, err := s.s.b.IsAccessible(ctx)
	if err == nil && !ok {
		err = errors.New("the bucket does not exist")
	}
	if err != nil {
		return fmt.Errorf("content store %s: %w", s.s.where, err)
	}
	return nil
}

// Close releases the store's connections.
func (s Store) Close() error {
	if s.s == nil {
		return nil
	}
	return s.s.b.Close()
}

// ValidSHA256 reports whether s is a sha256 in lower-case hex, the only
// form a key is built from.
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

// Key prefixes: pushed contents are kept (repair restores from them); log
// tails expire (tails.go).
const (
	contentPrefix = "sha256/"
	tailPrefix    = "tails/sha256/"
)

func key(prefix, sum string) string { return prefix + sum[:2] + "/" + sum }

// PutFile stores a local file. Its size is checked before it is read.
func (s Store) PutFile(ctx context.Context, name string) (proc.FileRef, error) {
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
	return s.Put(ctx, f, proc.MaxFileSize)
}

// Put stores what r yields, at most max bytes (more is refused, and
// nothing is kept). Content already there is not written again.
func (s Store) Put(ctx context.Context, r io.Reader, max int64) (proc.FileRef, error) {
	return s.put(ctx, contentPrefix, r, max)
}

// put spools r to a local temporary file while hashing it, since the key
// is its sha256, then writes it whole: a reader never sees part of one
// (a directory's object is renamed into place, an S3 object appears at
// the end of its upload, which checks its md5).
func (s Store) put(ctx context.Context, prefix string, r io.Reader, max int64) (proc.FileRef, error) {
	if s.s == nil {
		return proc.FileRef{}, ErrNotConfigured
	}
	tmp, err := os.CreateTemp("", "drover-put-*")
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
	ref := proc.FileRef{SHA256: hex.EncodeToString(sh.Sum(nil)), MD5: hex.EncodeToString(m.Sum(nil)), Size: n}
	k := key(prefix, ref.SHA256)
	if prefix == contentPrefix {
		if a, err := s.s.b.Attributes(ctx, k); err == nil && a.Size == n {
			return ref, nil
		}
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return proc.FileRef{}, err
	}
	w, err := s.s.b.NewWriter(ctx, k, &blob.WriterOptions{ContentType: "application/octet-stream", ContentMD5: m.Sum(nil),
		BeforeWrite: ownerOnly})
	if err != nil {
		return proc.FileRef{}, s.wrap(err)
	}
	if _, err := io.Copy(w, tmp); err != nil {
		_ = w.Close()
		return proc.FileRef{}, s.wrap(err)
	}
	if err := w.Close(); err != nil {
		return proc.FileRef{}, s.wrap(err)
	}
	return ref, nil
}

// ownerOnly makes a directory store's new file its owner's only (the
// directory is already).
func ownerOnly(as func(any) bool) error {
	var f *os.File
	if as(&f) {
		return f.Chmod(0o600)
	}
	return nil
}

// Stat returns the reference of stored content by its sha256, reading it
// whole to check it.
func (s Store) Stat(ctx context.Context, sum string) (proc.FileRef, error) {
	if s.s == nil {
		return proc.FileRef{}, ErrNotConfigured
	}
	if !ValidSHA256(sum) {
		return proc.FileRef{}, fmt.Errorf("%q is not a sha256 in lower-case hex", sum)
	}
	r, err := s.s.b.NewReader(ctx, key(contentPrefix, sum), nil)
	if err != nil {
		return proc.FileRef{}, s.missing(sum, err)
	}
	defer r.Close()
	sh, m := sha256.New(), md5.New()
	n, err := io.Copy(io.MultiWriter(sh, m), io.LimitReader(r, proc.MaxFileSize+1))
	if err != nil {
		return proc.FileRef{}, s.wrap(err)
	}
	if got := hex.EncodeToString(sh.Sum(nil)); got != sum {
		return proc.FileRef{}, fmt.Errorf("content %s in the content store %s is damaged (its sha256 is %s)", sum, s.s.where, got)
	}
	return proc.FileRef{SHA256: sum, MD5: hex.EncodeToString(m.Sum(nil)), Size: n}, nil
}

// Open opens stored content for reading. The reader checks the content
// against ref as it is read: damaged or replaced content fails at its end
// rather than being passed on.
func (s Store) Open(ctx context.Context, ref proc.FileRef) (io.ReadCloser, error) {
	return s.open(ctx, contentPrefix, ref)
}

func (s Store) open(ctx context.Context, prefix string, ref proc.FileRef) (io.ReadCloser, error) {
	if s.s == nil {
		return nil, ErrNotConfigured
	}
	if !ValidSHA256(ref.SHA256) {
		return nil, fmt.Errorf("%q is not a sha256 in lower-case hex", ref.SHA256)
	}
	if ref.Size > proc.MaxFileSize {
		return nil, fmt.Errorf("content %s %v", ref.SHA256, ErrTooLarge)
	}
	r, err := s.s.b.NewReader(ctx, key(prefix, ref.SHA256), nil)
	if err != nil {
		return nil, s.missing(ref.SHA256, err)
	}
	if r.Size() != ref.Size {
		r.Close()
		return nil, fmt.Errorf("content %s in the content store %s is not %d bytes", ref.SHA256, s.s.where, ref.Size)
	}
	return &checked{r: r, where: s.s.where, ref: ref, sha: sha256.New()}, nil
}

// missing words a failed read of sum: absent (with what to share), or the
// store's own trouble.
func (s Store) missing(sum string, err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("content %s is %w %s (%s)", sum, ErrNotFound, s.s.where, Shared)
	}
	if gcerrors.Code(err) == gcerrors.PermissionDenied || errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("content %s in the content store %s cannot be read: %v (%s)", sum, s.s.where, err, Shared)
	}
	return s.wrap(err)
}

func (s Store) wrap(err error) error { return fmt.Errorf("content store %s: %w", s.s.where, err) }

type checked struct {
	r     *blob.Reader
	where Location
	ref   proc.FileRef
	sha   hash.Hash
}

func (c *checked) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.sha.Write(p[:n])
	if err == io.EOF && hex.EncodeToString(c.sha.Sum(nil)) != c.ref.SHA256 {
		return n, fmt.Errorf("content %s in the content store %s changed while it was read", c.ref.SHA256, c.where)
	}
	return n, err
}

func (c *checked) Close() error { return c.r.Close() }
