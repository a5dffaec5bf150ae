package activities

import (
	"strings"
	"testing"
)

// The host's answers are untrusted input too: a broken or hostile host
// can print anything. FuzzParseProbe covers the status probe; these cover
// the control scripts' trailer and the status extras.

func FuzzParseControl(f *testing.F) {
	f.Add("started\n" + trailer + " rc=0 timeout=0\n")
	f.Add("no trailer at all")
	f.Add(trailer + " rc=x timeout=1 rc=")
	f.Fuzz(func(t *testing.T, out string) {
		o, ok := parseControl(out)
		if ok != strings.Contains(out, trailer+" ") {
			t.Fatalf("ok %v for %q", ok, out)
		}
		if len(o.Output) > 1024+len("...") || o.Output != strings.TrimSpace(o.Output) && !strings.HasSuffix(o.Output, "...") {
			t.Fatalf("output %q not trimmed and bounded", o.Output)
		}
	})
}

func FuzzParseExtras(f *testing.F) {
	f.Add("V\t1.2.3\nZ\t0\n")
	f.Add("Z\t1\nV\t\t\n")
	f.Add("garbage\n\tV\n")
	f.Fuzz(func(t *testing.T, out string) {
		ex := parseExtras(out)
		if ex.Version != strings.TrimSpace(ex.Version) {
			t.Fatalf("version %q not trimmed", ex.Version)
		}
		if !strings.Contains(out, "Z\t") && !ex.Healthy {
			t.Fatalf("unhealthy without a health line: %q", out)
		}
	})
}
