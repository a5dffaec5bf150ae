package filestore

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
)

func md5Of(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func dirStore(t *testing.T) (Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "content")
	s, err := Open(context.Background(), Location{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, dir
}

func TestPutOpenStat(t *testing.T) {
	ctx := context.Background()
	s, dir := dirStore(t)
	ref, err := s.Put(ctx, strings.NewReader("port = 2\n"), proc.MaxFileSize)
	if err != nil {
		t.Fatal(err)
	}
	if ref.MD5 != md5Of("port = 2\n") || ref.Size != 9 || !ValidSHA256(ref.SHA256) {
		t.Fatalf("ref %+v", ref)
	}
	r, err := s.Open(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(b) != "port = 2\n" {
		t.Fatalf("read back %q %v", b, err)
	}
	if st, err := s.Stat(ctx, ref.SHA256); err != nil || st != ref {
		t.Fatalf("stat %+v %v, want %+v", st, err, ref)
	}
	// The layout files_dir always had: an existing files_dir keeps its contents.
	path := filepath.Join(dir, "sha256", ref.SHA256[:2], ref.SHA256)
	for _, p := range []string{dir, filepath.Dir(path)} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s must be its owner's only: %v %v", p, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("%s must be its owner's only: %v", path, err)
	}
	// Content changed in the store fails its reader instead of passing on.
	if err := os.WriteFile(path, []byte("port = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, _ = s.Open(ctx, ref)
	if _, err := io.ReadAll(r); err == nil {
		t.Fatal("a changed content must fail its reader")
	}
	r.Close()
	if _, err := s.Stat(ctx, ref.SHA256); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("stat of a changed content: %v", err)
	}
}

func TestPutRefusesOverTheLimitAndKeepsNothing(t *testing.T) {
	ctx := context.Background()
	s, dir := dirStore(t)
	if _, err := s.Put(ctx, strings.NewReader("0123456789"), 5); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 0 {
		t.Fatalf("a refused put left %v", left)
	}
	if _, err := (Store{}).Put(ctx, strings.NewReader("x"), 5); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("no store: %v", err)
	}
	if _, err := s.Open(ctx, proc.FileRef{SHA256: "../../etc/passwd"}); err == nil {
		t.Fatal("a reference that is not a sha256 must be refused")
	}
	// Missing content names the store and what to share.
	sum := strings.Repeat("ab", 32)
	if _, err := s.Stat(ctx, sum); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "file://"+dir) ||
		!strings.Contains(err.Error(), "content_store") {
		t.Fatalf("missing content: %v", err)
	}
}

// A tail that many hosts' results name is read as often as they are, and
// expires by age, not by being read.
func TestTailsOutliveTheirReadersAndExpireByAge(t *testing.T) {
	ctx := context.Background()
	s, dir := dirStore(t)
	s.s.swept = time.Now() // no sweep in the background while the test ages a tail
	ref, err := s.PutTail(ctx, "same last line\n", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if text, err := s.ReadTail(ctx, ref); err != nil || text != "same last line\n" {
			t.Fatalf("read %d of a shared tail: %q %v", i, text, err)
		}
	}
	old, err := s.PutTail(ctx, "an old tail\n", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	aged := time.Now().Add(-TailKeep - time.Minute)
	if err := os.Chtimes(filepath.Join(dir, "tails", "sha256", old.SHA256[:2], old.SHA256), aged, aged); err != nil {
		t.Fatal(err)
	}
	pushed, err := s.Put(ctx, strings.NewReader("pushed\n"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "sha256", pushed.SHA256[:2], pushed.SHA256)
	if err := os.Chtimes(p, aged, aged); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SweepTails(ctx, time.Now().Add(-TailKeep)); n != 1 || err != nil {
		t.Fatalf("sweep deleted %d (%v), want the one expired tail", n, err)
	}
	if _, err := s.ReadTail(ctx, old); err == nil || !strings.Contains(err.Error(), "tails are kept 24h0m0s") {
		t.Fatalf("an expired tail: %v", err)
	}
	if _, err := s.ReadTail(ctx, ref); err != nil {
		t.Fatalf("a fresh tail was swept: %v", err)
	}
	if _, err := s.Stat(ctx, pushed.SHA256); err != nil {
		t.Fatalf("pushed content must never expire: %v", err)
	}
}

func TestLocate(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/var/lib/ops")
	for _, c := range []struct {
		store, dir string
		want       string
		err        string
	}{
		{"", "", "file:///var/lib/ops/drover/content", ""},
		{"", "/srv/drover", "file:///srv/drover", ""},
		{"file:///srv/drover/", "", "file:///srv/drover", ""},
		{"s3://drover-content?region=eu-west-1", "", "s3://drover-content?region=eu-west-1", ""},
		{"s3://b?endpoint=http://127.0.0.1:9000&use_path_style=true", "", "s3://b?endpoint=http://127.0.0.1:9000&use_path_style=true", ""},
		{"s3://b", "/srv/drover", "", "give one, not both"},
		{"s3://KEY:SECRET@b", "", "", "must not hold credentials"},
		{"s3://b/dir", "", "", "names a bucket only"},
		{"s3://", "", "", "want s3://BUCKET"},
		{"gs://b", "", "", "scheme must be file:// or s3://"},
		{"file://relative/dir", "", "", "want file:///ABSOLUTE/DIR"},
	} {
		l, err := Locate(c.store, c.dir)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("Locate(%q, %q): %v, want an error with %q", c.store, c.dir, err, c.err)
		case c.err == "" && (err != nil || l.String() != c.want):
			t.Errorf("Locate(%q, %q) = %s, %v; want %s", c.store, c.dir, l, err, c.want)
		}
	}
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/home/ops")
	if l, err := Locate("", ""); err != nil || l.Dir != "/home/ops/.local/share/drover/content" {
		t.Fatalf("default without XDG_DATA_HOME: %s %v", l, err)
	}
}
