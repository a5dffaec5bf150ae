// Package scriptfile loads the shell and PowerShell scripts drover embeds.
// A script's text is fixed: what a command is about reaches it as
// positional arguments, never as text formatted into it.
package scriptfile

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// includePrefix starts a line that stands for another file of the same
// directory, e.g. "# include: lib_probe.sh": a way to share functions
// between scripts that each go to a host as one text.
const includePrefix = "# include: "

// Load is the named script of fsys as a host receives it: each include
// line replaced by that file's own loaded text, and every line that holds
// only a comment, and every blank line, dropped. Comments then cost no
// bytes on the wire; no script may hold a quoted string spanning lines
// that begin with '#'.
func Load(fsys fs.FS, name string) (string, error) {
	return load(fsys, name, 0)
}

// MustLoad is Load for scripts embedded in the binary: a missing one is a
// build mistake.
func MustLoad(fsys fs.FS, name string) string {
	s, err := Load(fsys, name)
	if err != nil {
		panic(err)
	}
	return s
}

func load(fsys fs.FS, name string, depth int) (string, error) {
	if depth > 4 {
		return "", fmt.Errorf("script %s: includes nested too deep", name)
	}
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		if inc, ok := strings.CutPrefix(t, includePrefix); ok {
			s, err := load(fsys, path.Join(path.Dir(name), strings.TrimSpace(inc)), depth+1)
			if err != nil {
				return "", fmt.Errorf("script %s: %w", name, err)
			}
			out.WriteString(s)
			continue
		}
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		out.WriteString(strings.TrimRight(line, " \t\r"))
		out.WriteByte('\n')
	}
	return out.String(), nil
}
