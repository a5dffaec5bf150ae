package psenc

import "strings"

// singleQuotes are the characters PowerShell's tokenizer takes for a
// single quote: ' and the typographic ones. Inside a single-quoted string
// each is written twice to stand for itself.
const singleQuotes = "'\u2018\u2019\u201a\u201b"

// Quote is s as a PowerShell single-quoted string: nothing in it is
// expanded, and it ends only where Quote ends it.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for _, r := range s {
		if strings.ContainsRune(singleQuotes, r) {
			b.WriteRune(r)
		}
		b.WriteRune(r)
	}
	b.WriteByte('\'')
	return b.String()
}

// Invocation runs script as a script block whose param block takes args,
// each passed as a single-quoted literal: a value is never read as code,
// nor as a parameter name. A marker line names the script for the hosts'
// logs and the WinRM test double:
//
//	#drover:NAME
//	& {
//	SCRIPT
//	} 'ARG' 'ARG'
func Invocation(name, script string, args []string) string {
	var b strings.Builder
	if name != "" {
		b.WriteString(markerPrefix + name + "\n")
	}
	b.WriteString(blockStart)
	b.WriteString(strings.TrimSuffix(script, "\n"))
	b.WriteString(blockEnd)
	for _, a := range args {
		b.WriteByte(' ')
		b.WriteString(Quote(a))
	}
	return b.String()
}

const (
	markerPrefix = "#drover:"
	blockStart   = "& {\n"
	blockEnd     = "\n}"
)

// ParseInvocation reverses Invocation, also after lines put before it
// (PowerShellCommandLine's preference): the name, the script and its
// arguments; ok is false for a text Invocation did not make. The arguments
// start at the first "\n}" that only quoted literals follow.
func ParseInvocation(s string) (name, script string, args []string, ok bool) {
	for !strings.HasPrefix(s, markerPrefix) && !strings.HasPrefix(s, blockStart) {
		_, rest, found := strings.Cut(s, "\n")
		if !found {
			return "", "", nil, false
		}
		s = rest
	}
	if rest, found := strings.CutPrefix(s, markerPrefix); found {
		var line string
		line, s, found = strings.Cut(rest, "\n")
		if !found {
			return "", "", nil, false
		}
		name = line
	}
	body, found := strings.CutPrefix(s, blockStart)
	if !found {
		return "", "", nil, false
	}
	for off := 0; ; {
		i := strings.Index(body[off:], blockEnd)
		if i < 0 {
			return "", "", nil, false
		}
		i += off
		if a, ok := parseLiterals(body[i+len(blockEnd):]); ok {
			return name, body[:i] + "\n", a, true
		}
		off = i + 1
	}
}

// parseLiterals reads s as zero or more " 'literal'" and nothing else.
func parseLiterals(s string) ([]string, bool) {
	args := []string{}
	rs := []rune(s)
	for i := 0; i < len(rs); {
		if rs[i] != ' ' || i+1 >= len(rs) || !isQuote(rs[i+1]) {
			return nil, false
		}
		var b strings.Builder
		closed := false
		for i += 2; i < len(rs); i++ {
			if isQuote(rs[i]) {
				if i+1 < len(rs) && isQuote(rs[i+1]) {
					i++
					b.WriteRune(rs[i])
					continue
				}
				closed = true
				i++
				break
			}
			b.WriteRune(rs[i])
		}
		if !closed {
			return nil, false
		}
		args = append(args, b.String())
	}
	return args, true
}

func isQuote(r rune) bool { return strings.ContainsRune(singleQuotes, r) }
