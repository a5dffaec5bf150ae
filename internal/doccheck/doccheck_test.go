package doccheck

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestDocLinksResolve: every link of README.md and docs/*.md names a file
// of the repository that exists, and every anchor a heading of its page.
func TestDocLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 2 {
		t.Fatalf("pages checked: %v; want README.md and docs/*.md", pages)
	}
	problems, err := Check(root, pages)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Supervision (托管)": "supervision-托管",
		"Can the workers reach every host? `starter hosts check`":                     "can-the-workers-reach-every-host-starter-hosts-check",
		"What each op_type does on a host":                                            "what-each-op_type-does-on-a-host",
		"Chaos: faults and bad input":                                                 "chaos-faults-and-bad-input",
		"Hosts from Ansible and the BlueKing CMDB":                                    "hosts-from-ansible-and-the-blueking-cmdb",
		"Supervision cost (200 hosts × 5 managed processes, 5s interval, 2m0s quiet)": "supervision-cost-200-hosts--5-managed-processes-5s-interval-2m0s-quiet",
		"Plans: `--plan`":                    "plans---plan",
		"See [the API](http-api.md) **now**": "see-the-api-now",
		"What drover's time goes":            "what-drovers-time-goes",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestCheckFindsBrokenLinks: each kind of broken link is reported with its
// page and line, and what resolves, or is not a link, is not.
func TestCheckFindsBrokenLinks(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", `# Project

See [ops](docs/ops.md), [its cluster](docs/ops.md#a-production-cluster) and [tour](#a-tour).
Broken: [gone](docs/gone.md), [bad anchor](docs/ops.md#no-such-heading), [here](#nowhere).
Outside: [up](../elsewhere.md). Elsewhere: [site](https://example.com/#x), <https://example.com>.
A directory [docs](docs/) and a line [L](docs/run.sh#L3), not [a heading](docs/run.sh#usage).

## A tour

`+"`[not a link](missing.md)`"+` and [text][def], [undefined][nope], [shortcut].

[def]: docs/ops.md#托管-supervision
[shortcut]: docs/missing.md
`)
	write("docs/ops.md", "# Ops\n\n## A production cluster\n\n## 托管 supervision\n\n## Again\n\n## Again\n\n"+
		"[twice](#again-1) [back](../README.md#a-tour) [self](ops.md#again) [escaped](#%E6%89%98%E7%AE%A1-supervision)\n\n"+
		"```sh\n# not a heading\n[in code](nowhere.md)\n```\n\nSetext\n------\n\n[setext](#setext) [not there](#again-2)\n")
	write("docs/run.sh", "#!/bin/sh\n")

	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"README.md", "docs/ops.md"}; !reflect.DeepEqual(pages, want) {
		t.Fatalf("pages %v, want %v", pages, want)
	}
	got, err := Check(root, pages)
	if err != nil {
		t.Fatal(err)
	}
	want := []Problem{
		{"README.md", 4, "docs/gone.md", "docs/gone.md does not exist"},
		{"README.md", 4, "docs/ops.md#no-such-heading", "no heading in docs/ops.md has the anchor #no-such-heading"},
		{"README.md", 4, "#nowhere", "no heading in README.md has the anchor #nowhere"},
		{"README.md", 5, "../elsewhere.md", "points outside the repository"},
		{"README.md", 6, "docs/run.sh#usage", "docs/run.sh is not a markdown page: no anchor #usage there"},
		{"README.md", 13, "docs/missing.md", "docs/missing.md does not exist"},
		{"README.md", 10, "[nope]", "no reference definition"},
		{"docs/ops.md", 21, "#again-2", "no heading in docs/ops.md has the anchor #again-2"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%v\nwant:\n%v", got, want)
	}
}
