package filestore

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-sh/drover/proc"
)

func md5Of(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestPutOpenStat(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	ref, err := s.Put(strings.NewReader("port = 2\n"), proc.MaxFileSize)
	if err != nil {
		t.Fatal(err)
	}
	if ref.MD5 != md5Of("port = 2\n") || ref.Size != 9 || !ValidSHA256(ref.SHA256) {
		t.Fatalf("ref %+v", ref)
	}
	r, err := s.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(b) != "port = 2\n" {
		t.Fatalf("read back %q %v", b, err)
	}
	if st, err := s.Stat(ref.SHA256); err != nil || st != ref {
		t.Fatalf("stat %+v %v, want %+v", st, err, ref)
	}
	if fi, err := os.Stat(filepath.Join(s.Dir, "sha256")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the store must be its owner's only: %v %v", fi.Mode(), err)
	}
	// Content changed in the store fails its reader instead of passing on.
	if err := os.WriteFile(s.path(ref.SHA256), []byte("port = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, _ = s.Open(ref)
	if _, err := io.ReadAll(r); err == nil {
		t.Fatal("a changed content must fail its reader")
	}
	r.Close()
}

func TestPutRefusesOverTheLimitAndKeepsNothing(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if _, err := s.Put(strings.NewReader("0123456789"), 5); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(s.Dir, "sha256", "*"))
	if len(left) != 0 {
		t.Fatalf("a refused put left %v", left)
	}
	if _, err := (Store{}).Put(strings.NewReader("x"), 5); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("no files_dir: %v", err)
	}
	if _, err := s.Open(proc.FileRef{SHA256: "../../etc/passwd"}); err == nil {
		t.Fatal("a reference that is not a sha256 must be refused")
	}
}
