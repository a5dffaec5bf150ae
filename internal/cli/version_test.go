package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/drover-sh/drover/internal/version"
)

// Both binaries say what they are: the stamped version and commit, by
// --version and by a version command.
func TestBinariesPrintTheirVersion(t *testing.T) {
	version.Version, version.Commit = "v0.9.1", "0123456789abcdef0123456789abcdef01234567"
	defer func() { version.Version, version.Commit = "", "" }()
	want := "drover v0.9.1 (commit 0123456789abcdef0123456789abcdef01234567, go"
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var out, errOut bytes.Buffer
		if code := Execute(args, &out, &errOut); code != ExitOK || !strings.HasPrefix(out.String(), "starter "+want) {
			t.Errorf("starter %v: exit %d %q %s", args, code, out.String(), errOut.String())
		}
		var wout bytes.Buffer
		w := NewWorker()
		w.SetOut(&wout)
		w.SetArgs(args)
		if err := w.Execute(); err != nil || !strings.HasPrefix(wout.String(), "worker "+want) {
			t.Errorf("worker %v: %v %q", args, err, wout.String())
		}
	}
	if id := WorkerIdentity(); !strings.Contains(id, " drover-worker v0.9.1@0123456789ab") {
		t.Errorf("worker identity %q lacks the build", id)
	}
}
