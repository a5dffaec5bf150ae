package transport

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// hardArgs are values no script may read as code: each must reach it as
// the very bytes sent.
var hardArgs = []string{
	"", "plain", "two words", "it's", `"double"`, "$HOME", "$(touch pwned)", "`id`", "a\nb", "\ttab", "*", "-n", "--",
	"back\\slash", "'; exit 9; '", "trailing\n", "ünï 😀", "x=1",
}

// echoArgs prints $0, then each argument between brackets, one a line.
const echoArgs = `printf '0=%s\n' "$0"; for a; do printf '[%s]\n' "$a"; done`

func wantEchoed(args []string) string {
	var b strings.Builder
	b.WriteString("0=" + scriptArg0 + "\n")
	for _, a := range args {
		b.WriteString("[" + a + "]\n")
	}
	return b.String()
}

// TestShellCommandPassesArgumentsLiterally runs the rendered command line
// with this machine's sh: every argument arrives as it was, $0 is fixed.
func TestShellCommandPassesArgumentsLiterally(t *testing.T) {
	dir := t.TempDir()
	line := ShellCommand(Command{Name: "echo", Script: echoArgs, Args: hardArgs})
	c := exec.Command("sh", "-c", line)
	c.Dir = dir
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, line)
	}
	if got, want := string(out), wantEchoed(hardArgs); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if entries, _ := exec.Command("ls", "-A", dir).Output(); len(entries) != 0 {
		t.Fatalf("an argument ran: %s", entries)
	}
}

// TestWrapperPassesArguments: through the wrapper, with and without the
// watchdog, the script gets the same arguments, and the exit code.
func TestWrapperPassesArguments(t *testing.T) {
	for _, deadline := range []time.Duration{0, 30 * time.Second} {
		cmd := Command{Name: "echo", Script: echoArgs + "; exit 5", Args: hardArgs}
		c := exec.Command("setsid", "sh", "-c", remoteCommand("", cmd, deadline))
		var stdout bytes.Buffer
		stderr := newMarkerStderr()
		c.Stdout, c.Stderr = &stdout, stderr
		err := c.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 {
			t.Fatalf("deadline %v: exit %v, stderr %q", deadline, err, stderr.Bytes())
		}
		if got, want := stdout.String(), wantEchoed(hardArgs); got != want {
			t.Fatalf("deadline %v: got\n%s\nwant\n%s", deadline, got, want)
		}
		if seen, _ := stderr.started(); !seen {
			t.Fatalf("deadline %v: no start marker", deadline)
		}
	}
}

// TestScriptsHoldNoComments: comment lines stay in the files, not on the
// wire; the marker the wrapper prints is the one Go looks for.
func TestScriptsHoldNoComments(t *testing.T) {
	for name, s := range map[string]string{"wrapper": wrapper, "kill": killScript, "sftp_server": sftpServer} {
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "#") {
				t.Errorf("%s keeps a comment line %q", name, l)
			}
		}
		if err := exec.Command("sh", "-n", "-c", s).Run(); err != nil {
			t.Errorf("%s does not parse: %v", name, err)
		}
	}
	if !strings.Contains(wrapper, startMarker) {
		t.Errorf("the wrapper does not print %s", startMarker)
	}
}
