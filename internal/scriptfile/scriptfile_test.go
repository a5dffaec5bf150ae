package scriptfile

import (
	"testing"
	"testing/fstest"
)

func TestLoadExpandsIncludesAndDropsComments(t *testing.T) {
	fsys := fstest.MapFS{
		"s/main.sh": {Data: []byte("# shellcheck shell=sh\n# what main does\n\n# include: lib.sh\nf \"$1\"  \n  # indented comment\necho '#not a comment'\n")},
		"s/lib.sh":  {Data: []byte("# a library\nf() { echo \"$1\"; }\n")},
		"s/loop.sh": {Data: []byte("# include: loop.sh\n")},
	}
	got, err := Load(fsys, "s/main.sh")
	if err != nil {
		t.Fatal(err)
	}
	if want := "f() { echo \"$1\"; }\nf \"$1\"\necho '#not a comment'\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if _, err := Load(fsys, "s/loop.sh"); err == nil {
		t.Fatal("an include loop must fail")
	}
	if _, err := Load(fsys, "s/none.sh"); err == nil {
		t.Fatal("a missing script must fail")
	}
}
