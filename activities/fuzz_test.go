package activities

import (
	"fmt"
	"strings"
	"testing"
)

// The host's answers are untrusted input too: a broken or hostile host
// can print anything. FuzzParseProbe covers the status probe; these cover
// the control scripts' trailer and the status extras.

// setups are the trailer's setup= values, and none.
var setups = []string{"", setupMissing, setupNotDir, setupDenied, setupNoTemp}

func FuzzParseControl(f *testing.F) {
	f.Add("started", 0, false, byte(0))
	f.Add("no trailer at all\n"+trailer+" rc=0 timeout=0", 1, true, byte(1))
	f.Add(trailer+" rc=x timeout=1 rc=", -3, false, byte(4))
	f.Fuzz(func(t *testing.T, cmdOut string, rc int, timedOut bool, setup byte) {
		// Whatever the command printed, a trailer that ends the output
		// decides the outcome: a command cannot forge its own exit status
		// by printing a trailer, and its output is what came before.
		to := 0
		if timedOut {
			to = 1
		}
		s := setups[int(setup)%len(setups)]
		line := fmt.Sprintf("%s rc=%d timeout=%d", trailer, rc, to)
		if s != "" {
			line += " setup=" + s
		}
		o, ok := parseControl(cmdOut + "\n" + line + "\n")
		if !ok || o.RC != rc || o.TimedOut != timedOut || o.Setup != s {
			t.Fatalf("trailer %q after %q read as %+v (ok %v)", line, cmdOut, o, ok)
		}
		if want := trim(cmdOut); o.Output != want {
			t.Fatalf("output %q, want the command's own %q", o.Output, want)
		}

		// The command's output alone, as from a script cut short: what it
		// claims must be bounded, on one line, and trimmed.
		o, ok = parseControl(cmdOut)
		if !ok && (o.RC != 0 || o.TimedOut || o.Setup != "") {
			t.Fatalf("no trailer, yet an outcome: %+v", o)
		}
		if len(o.Output) > 1024+len("...") || strings.ContainsAny(o.Output, "\r\n") ||
			o.Output != strings.TrimSpace(o.Output) && !strings.HasSuffix(o.Output, "...") {
			t.Fatalf("output %q not one trimmed, bounded line", o.Output)
		}
	})
}

func FuzzParseExtras(f *testing.F) {
	f.Add("V\t1.2.3\nZ\t0\n", "1.2.3", 0)
	f.Add("Z\t1\nV\t\t\n", " v2 ", 1)
	f.Add("garbage\n\tV\n", "", 127)
	f.Fuzz(func(t *testing.T, out, version string, rc int) {
		// What status.sh prints reads back: version_cmd's line,
		// trimmed, and health_cmd's status (0 is healthy).
		if !strings.ContainsAny(version, "\r\n") {
			ex := parseExtras(fmt.Sprintf("V\t%s\nZ\t%d\n", version, rc))
			if ex.Version != strings.TrimSpace(version) || ex.Healthy != (rc == 0) {
				t.Fatalf("version %q, rc %d read as %+v", version, rc, ex)
			}
		}
		ex := parseExtras(out)
		if ex.Version != strings.TrimSpace(ex.Version) || strings.ContainsAny(ex.Version, "\r\n") {
			t.Fatalf("version %q not one trimmed line", ex.Version)
		}
		if !strings.Contains(out, "Z\t") && !ex.Healthy {
			t.Fatalf("unhealthy without a health line: %q", out)
		}
		if !strings.Contains(out, "V\t") && ex.Version != "" {
			t.Fatalf("version %q without a version line: %q", ex.Version, out)
		}
	})
}
