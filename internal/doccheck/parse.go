package doccheck

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// doc is what a page holds for the check: its anchors, its links (inline
// and the targets of reference definitions), the references it uses, and
// the labels it defines.
type doc struct {
	anchors map[string]bool
	links   []link
	refs    []ref
	defs    map[string]bool
}

type link struct {
	line   int
	target string
}

type ref struct {
	line  int
	label string
}

var (
	fence      = regexp.MustCompile("^\\s*(`{3,}|~{3,})")
	atx        = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setext     = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	definition = regexp.MustCompile(`^ {0,3}\[([^\]]+)\]:[ \t]*(<[^>]*>|\S+)`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	// An inline link or image: [text](, the text allowing one level of
	// nested brackets (an image in a link).
	inlineOpen = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(`)
	// A full or collapsed reference: [text][label] or [text][]. A
	// shortcut [label] is a link only where the label is defined, and its
	// target is checked at the definition.
	fullRef = regexp.MustCompile(`\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\[([^\[\]]*)\]`)
)

// parse reads a page. Fenced code blocks and code spans hold no headings
// or links.
func parse(md string) doc {
	d := doc{anchors: map[string]bool{}, defs: map[string]bool{}}
	seen := map[string]int{}
	addHeading := func(text string) {
		s := Slug(text)
		if n, dup := seen[s]; dup {
			// GitHub numbers a repeated slug: x, x-1, x-2.
			for {
				n++
				if cand := s + "-" + strconv.Itoa(n); !d.anchors[cand] {
					seen[s] = n
					s = cand
					break
				}
			}
		} else {
			seen[s] = 0
		}
		d.anchors[s] = true
	}
	var open string // the fence of the code block we are in
	var prev string // the previous line, when it can be a setext heading's text
	var uses []ref
	for i, line := range strings.Split(md, "\n") {
		n := i + 1
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case open == "":
				open = m[1]
			case m[1][0] == open[0] && len(m[1]) >= len(open) && strings.TrimSpace(line) == m[1]:
				open = ""
			}
			prev = ""
			continue
		}
		if open != "" {
			continue
		}
		if m := atx.FindStringSubmatch(line); m != nil {
			addHeading(m[2])
			prev = ""
			continue
		}
		if setext.MatchString(line) && prev != "" {
			addHeading(prev)
			prev = ""
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		if m := definition.FindStringSubmatch(line); m != nil {
			d.defs[normLabel(m[1])] = true
			d.links = append(d.links, link{n, strings.Trim(m[2], "<>")})
			prev = ""
			continue
		}
		text := stripCodeSpans(line)
		for _, loc := range inlineOpen.FindAllStringIndex(text, -1) {
			if t, ok := destination(text[loc[1]:]); ok {
				d.links = append(d.links, link{n, t})
			}
		}
		rest := inlineOpen.ReplaceAllString(text, "(")
		for _, m := range fullRef.FindAllStringSubmatch(rest, -1) {
			label := m[2]
			if label == "" {
				label = m[1]
			}
			uses = append(uses, ref{n, normLabel(label)})
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "|") {
			prev = ""
		} else {
			prev = strings.TrimSpace(line)
		}
	}
	d.refs = uses
	return d
}

// stripCodeSpans drops the code spans of a line: a run of backticks up to
// the next run of as many. A run with no match is left as it is.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		n := i
		for n < len(line) && line[n] == '`' {
			n++
		}
		run := line[i:n]
		end := closingRun(line[n:], len(run))
		if end < 0 {
			b.WriteString(line[:n])
			line = line[n:]
			continue
		}
		b.WriteString(line[:i])
		line = line[n+end+len(run):]
	}
}

// closingRun is the index in s of the first run of exactly n backticks,
// or -1.
func closingRun(s string, n int) int {
	for i := 0; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		if j-i == n {
			return i
		}
		i = j
	}
	return -1
}

// destination reads a link's destination from just after its "(":
// <...>, or up to a space or the ")" that closes it, with balanced
// parentheses inside.
func destination(s string) (string, bool) {
	s = strings.TrimLeft(s, " \t")
	if strings.HasPrefix(s, "<") {
		end := strings.IndexByte(s, '>')
		if end < 0 {
			return "", false
		}
		return s[1:end], true
	}
	depth := 0
	for i, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth == 0:
			return s[:i], true
		case r == ')':
			depth--
		case r == ' ' || r == '\t':
			return s[:i], true
		}
	}
	return "", false
}

// normLabel folds a reference label as markdown matches them: case and
// runs of white space do not count.
func normLabel(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

var (
	inlineLink = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
)

// Slug is the anchor GitHub gives a heading: the heading's text as
// rendered (no code backticks, links as their text, no emphasis stars or
// tags), lower-cased, each space a '-', and every character dropped that
// is not a letter, a digit, a mark, '-' or '_'. Letters of any script stay.
func Slug(heading string) string {
	text := inlineLink.ReplaceAllString(heading, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	text = strings.NewReplacer("`", "", "*", "").Replace(strings.TrimSpace(text))
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_', unicode.IsLetter(r), unicode.IsNumber(r), unicode.IsMark(r), unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
