// Package doccheck checks the links of drover's markdown pages: every
// relative link names a file that exists, and every #anchor names a heading
// of the page it points at, slugged as GitHub renders headings. Links to
// other sites (any URL with a scheme) are not followed.
package doccheck

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Problem is one link that does not resolve.
type Problem struct {
	File string // relative to the root
	Line int
	Link string
	Msg  string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: link %q: %s", p.File, p.Line, p.Link, p.Msg)
}

// Pages lists the pages checked: README.md and docs/*.md, relative to root.
func Pages(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	pages := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			return nil, err
		}
		pages = append(pages, filepath.ToSlash(rel))
	}
	sort.Strings(pages[1:])
	return pages, nil
}

// Check reads each page (a path relative to root, with /) and returns
// every link in it that does not resolve.
func Check(root string, pages []string) ([]Problem, error) {
	c := checker{root: root, anchors: map[string]map[string]bool{}}
	var problems []Problem
	for _, page := range pages {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			return nil, err
		}
		doc := parse(string(data))
		c.anchors[page] = doc.anchors
		for _, l := range doc.links {
			if msg := c.resolve(page, l.target); msg != "" {
				problems = append(problems, Problem{File: page, Line: l.line, Link: l.target, Msg: msg})
			}
		}
		for _, r := range doc.refs {
			if _, ok := doc.defs[r.label]; !ok {
				problems = append(problems, Problem{File: page, Line: r.line, Link: "[" + r.label + "]", Msg: "no reference definition"})
			}
		}
	}
	return problems, nil
}

type checker struct {
	root    string
	anchors map[string]map[string]bool // page → its anchors, read once
}

var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// resolve says what is wrong with target, a link in page; "" when nothing.
func (c *checker) resolve(page, target string) string {
	if scheme.MatchString(target) {
		return "" // another site, or mail
	}
	file, frag, _ := strings.Cut(target, "#")
	if file == "" {
		file = page
	} else {
		p, err := url.PathUnescape(file)
		if err != nil {
			return "bad escape in path"
		}
		if strings.HasPrefix(p, "/") {
			file = path.Clean(strings.TrimPrefix(p, "/"))
		} else {
			file = path.Join(path.Dir(page), p)
		}
		if file == ".." || strings.HasPrefix(file, "../") {
			return "points outside the repository"
		}
	}
	info, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(file)))
	if err != nil {
		return fmt.Sprintf("%s does not exist", file)
	}
	if frag == "" {
		return ""
	}
	anchor, err := url.PathUnescape(frag)
	if err != nil {
		return "bad escape in anchor"
	}
	if info.IsDir() || !strings.HasSuffix(file, ".md") {
		if lineAnchor.MatchString(anchor) {
			return ""
		}
		return fmt.Sprintf("%s is not a markdown page: no anchor #%s there", file, anchor)
	}
	anchors, ok := c.anchors[file]
	if !ok {
		data, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(file)))
		if err != nil {
			return err.Error()
		}
		anchors = parse(string(data)).anchors
		c.anchors[file] = anchors
	}
	if !anchors[anchor] {
		return fmt.Sprintf("no heading in %s has the anchor #%s", file, anchor)
	}
	return ""
}

// lineAnchor is GitHub's anchor of a line, or lines, of a source file.
var lineAnchor = regexp.MustCompile(`^L[0-9]+(-L[0-9]+)?$`)
