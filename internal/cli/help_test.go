package cli

import (
	"bytes"
	"strings"
	"testing"
)

// workerOnly are the settings a starter user cannot act on.
var workerOnly = []string{"--supervise-interval", "--limit-polls", "--ssh-tofu", "--max-concurrent-activities",
	"--max-pooled-connections", "--max-sessions-per-host", "--metrics-listen"}

func TestStarterHelpShowsNoWorkerSettings(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"status", "--help"}, {"ps", "--help"}, {"events", "--help"}, {"serve", "--help"}} {
		var out, errOut bytes.Buffer
		if code := Execute(args, &out, &errOut); code != ExitOK {
			t.Fatalf("%v: exit %d %s", args, code, errOut.String())
		}
		help := out.String()
		if !strings.Contains(help, "--temporal-address") || !strings.Contains(help, "--inventory") {
			t.Fatalf("%v: the connection flags are missing:\n%s", args, help)
		}
		for _, f := range workerOnly {
			if strings.Contains(help, f) {
				t.Errorf("starter %v shows the worker's %s:\n%s", args, f, help)
			}
		}
	}
	var out bytes.Buffer
	w := NewWorker()
	w.SetOut(&out)
	w.SetArgs([]string{"--help"})
	if err := w.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, f := range append(workerOnly, "--temporal-address") {
		if !strings.Contains(out.String(), f) {
			t.Errorf("worker --help lacks %s:\n%s", f, out.String())
		}
	}
}
