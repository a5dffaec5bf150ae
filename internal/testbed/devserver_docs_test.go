package testbed

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestOperatingDocsStartTheDevServerAsTheTestsDo holds the dev server's
// command in docs/operating.md to the settings the tests and benchmarks
// run it with: an operator who copies it gets the measured server.
func TestOperatingDocsStartTheDevServerAsTheTestsDo(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	cmd := devServerCommand(string(doc))
	if cmd == "" {
		t.Fatal("docs/operating.md has no `bin/temporal server start-dev` command")
	}
	if want := "GOGC=" + DevServerGOGC + " bin/temporal server start-dev"; !strings.HasPrefix(cmd, want) {
		t.Errorf("the documented command starts %q, want %q", cmd[:min(len(cmd), len(want))], want)
	}
	var documented []string
	for _, m := range regexp.MustCompile(`--dynamic-config-value\s+('[^']*'|\S+)`).FindAllStringSubmatch(cmd, -1) {
		documented = append(documented, strings.Trim(m[1], "'"))
	}
	for _, v := range DevServerFleetConfig {
		if !slices.Contains(documented, v) {
			t.Errorf("docs/operating.md does not give the dev server %s", v)
		}
	}
	for _, v := range documented {
		if !slices.Contains(DevServerFleetConfig, v) {
			t.Errorf("docs/operating.md gives the dev server %s, which the tests do not run with", v)
		}
	}
}

// devServerCommand is the first dev server command of doc, its continued
// lines joined.
func devServerCommand(doc string) string {
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "bin/temporal server start-dev") {
			continue
		}
		cmd := l
		for strings.HasSuffix(strings.TrimSpace(cmd), `\`) && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(strings.TrimSpace(cmd), `\`) + " " + strings.TrimSpace(lines[i])
		}
		return strings.TrimSpace(cmd)
	}
	return ""
}
