package activities

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
)

// TestStatusOfAProvenProcessForksLess: once a probe proved the pid file's
// process the spec's, a status of that incarnation forks no readlink, no
// tr and (USER naming the account) no id, and still reports it with its
// command line. Another incarnation is read in full, and a USER that is
// not the account is checked by id.
func TestStatusOfAProvenProcessForksLess(t *testing.T) {
	if _, err := os.Stat("/proc/sys/kernel/random/boot_id"); err != nil {
		t.Skip("no boot_id on this kernel: every probe reads the host in full")
	}
	me, err := user.Current()
	must(t, err)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "svcstat.pid")
	first := startNamed(t, dir, "svcstat")
	must(t, os.WriteFile(pidFile, []byte(strconv.Itoa(first.Process.Pid)+"\n"), 0o644))

	// readlink, tr and id, each noting in forked that it ran.
	bin, forked := t.TempDir(), filepath.Join(dir, "forked")
	for _, c := range []string{"readlink", "tr", "id"} {
		real, err := exec.LookPath(c)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(bin, c), []byte("#!/bin/sh\necho "+c+" >> '"+forked+"'\nexec '"+real+"' \"$@\"\n"), 0o755))
	}
	ran := func() string {
		b, _ := os.ReadFile(forked)
		_ = os.Remove(forked)
		return strings.Join(strings.Fields(string(b)), " ")
	}
	path := "PATH=" + bin + ":" + os.Getenv("PATH")
	a := oneHost(t, localRunner{env: []string{path, "USER=" + me.Username}})
	spec := proc.Spec{ProcName: "svcstat", SetupPath: dir, PidPath: pidFile, Account: me.Username, OpTimeout: 30 * time.Second}
	status := func(what string, pid int) {
		t.Helper()
		out, err := a.HostOp(context.Background(), HostOpInput{Op: proc.OpStatus, Target: proc.Target{IP: "10.0.0.1"},
			Process: proc.ProcessID{Namespace: "gse", Name: "svcstat"}, Spec: spec})
		must(t, err)
		cmdline := `"cmdline":"` + filepath.Join(dir, "svcstat") + ` 300"`
		if out.Result.Code != proc.CodeSuccess || out.Pid != pid || !strings.Contains(out.Result.Content, cmdline) {
			t.Fatalf("%s: code %d (%s), pid %d (want %d), content %s", what, out.Result.Code, out.Result.Message, out.Pid, pid, out.Result.Content)
		}
	}

	status("first status", first.Process.Pid)
	if got := ran(); !strings.Contains(got, "readlink") || !strings.Contains(got, "tr") {
		t.Fatalf("the first status must read the exe and command line; it ran %q", got)
	}
	status("status of the proven incarnation", first.Process.Pid)
	if got := ran(); got != "" {
		t.Fatalf("a status of the proven incarnation ran %q", got)
	}

	_ = first.Process.Kill()
	_ = first.Wait()
	second := startNamed(t, dir, "svcstat")
	must(t, os.WriteFile(pidFile, []byte(strconv.Itoa(second.Process.Pid)+"\n"), 0o644))
	status("another incarnation", second.Process.Pid)
	if got := ran(); !strings.Contains(got, "readlink") || !strings.Contains(got, "tr") {
		t.Fatalf("another incarnation must be read in full; the status ran %q", got)
	}

	a.Runner = localRunner{env: []string{path, "USER=" + me.Username + "x"}}
	status("USER not the account", second.Process.Pid)
	if got := ran(); got != "id" {
		t.Fatalf("a USER that is not the account must be checked by id, alone; the status ran %q", got)
	}
}
