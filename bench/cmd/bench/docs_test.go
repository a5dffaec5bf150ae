package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// resultSections are the marker pairs a full run's writers look for.
var resultSections = [][2]string{
	{benchBegin, benchEnd},
	{fleetOpsBegin, fleetOpsEnd},
	{fleetBegin, fleetEnd},
}

// TestDocsPageHoldsEveryResultSection: the docs page the writers target
// has each marker pair once, begin before end, so a run into the default
// results directory finds every section it rewrites.
func TestDocsPageHoldsEveryResultSection(t *testing.T) {
	data, err := os.ReadFile(docsPage())
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	for _, m := range resultSections {
		if strings.Count(page, m[0]) != 1 || strings.Count(page, m[1]) != 1 {
			t.Errorf("%s: want %q and %q once each", docsPage(), strings.TrimSpace(m[0]), strings.TrimSpace(m[1]))
			continue
		}
		if strings.Index(page, m[0]) > strings.Index(page, m[1]) {
			t.Errorf("%s: %q comes after its end marker", docsPage(), strings.TrimSpace(m[0]))
		}
	}
}

// TestRefreshSectionReplacesOnlyItsSection: a section is rewritten between
// its markers and the rest of the page, other sections included, is kept;
// a page without the markers is left as it was.
func TestRefreshSectionReplacesOnlyItsSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	page := "# Benchmarks\n\nmethod\n\n" + benchBegin + "old status\n" + benchEnd + "\ntext\n\n" + fleetBegin + "old fleet\n" + fleetEnd + "after\n"
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := refreshSection(path, fleetBegin, fleetEnd, "### Fleet supervision\n\nnew fleet\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := strings.Replace(page, "old fleet\n", "### Fleet supervision\n\nnew fleet\n", 1)
	if string(got) != want {
		t.Fatalf("after refresh:\n%s\nwant:\n%s", got, want)
	}

	if err := refreshSection(path, fleetOpsBegin, fleetOpsEnd, "new ops\n"); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); string(again) != want {
		t.Fatalf("a page without the fleet-size ops markers changed:\n%s", again)
	}
}
