package testbed

import (
	"strings"
	"testing"
	"time"
)

func TestWindowsLineLanguage(t *testing.T) {
	w := newWindows("Administrator")
	w.files[winKey(`C:\app\start.bat`)] = "@echo off\r\nrem comment\r\nspawn svc.exe run\\svc.pid cpu=0.5 mem=1048576\r\necho started %1\r\n"
	out, errOut, rc := w.exec(`"C:\app\start.bat" one`, `C:\app`, "bat", nil, 0)
	if rc != 0 || out != "started one\r\n" || errOut != "" {
		t.Fatalf("start.bat: %q %q %d", out, errOut, rc)
	}
	pid := w.pidIn(`C:\APP\run\svc.pid`) // paths ignore case, as on Windows
	p := w.procs[pid]
	if p == nil || p.Exe != `C:\app\svc.exe` || p.CPUShare != 0.5 || p.WorkingSet != 1<<20 || pid%4 != 0 {
		t.Fatalf("spawned %+v (pid %d)", p, pid)
	}
	if _, e, rc := w.exec("frobnicate", `C:\app`, "bat", nil, 0); rc != 1 || !strings.Contains(e, "'frobnicate' is not recognized as an internal or external command") {
		t.Fatalf("unknown command: %q %d", e, rc)
	}
	if _, e, rc := w.exec("frobnicate", `C:\app`, "ps1", nil, 0); rc != 1 || !strings.Contains(e, "The term 'frobnicate' is not recognized") {
		t.Fatalf("unknown ps1 command: %q %d", e, rc)
	}
	if _, _, rc := w.exec("echo a\nexit /b 4\necho b", `C:\app`, "bat", nil, 0); rc != 4 {
		t.Fatalf("exit code %d", rc)
	}

	// A signal names the incarnation: a wrong creation time (a reused pid)
	// leaves the process alone.
	boot := dotnetTicks(w.boot)
	start := dotnetTicks(p.Created) - (boot - boot%10_000_000)
	w.signal(winSignalParams{Pid: pid, Start: start + 1})
	if w.procs[pid] == nil {
		t.Fatal("a signal for another incarnation stopped the process")
	}
	w.signal(winSignalParams{Pid: pid, Start: start, Force: true})
	if w.procs[pid] != nil {
		t.Fatal("the signal for this incarnation did not stop it")
	}

	// A control command past its timeout is stopped and reported.
	began := time.Now()
	out = w.control(winControlParams{Setup: `C:\app`, Shell: "bat", Cmd: "sleep 30", TimeoutS: 1}, nil)
	if !strings.HasSuffix(out, "__drover_rc__ rc=1 timeout=1\r\n") || time.Since(began) > 5*time.Second {
		t.Fatalf("timeout: %q after %s", out, time.Since(began))
	}
	if out := w.control(winControlParams{Setup: `C:\nowhere`, Shell: "bat", Cmd: "echo x", TimeoutS: 1}, nil); !strings.Contains(out, "setup=missing") {
		t.Fatalf("missing setup_path: %q", out)
	}
}

func TestWindowsRefusesForeignPowerShell(t *testing.T) {
	w := newWindows("Administrator")
	if _, e, rc := w.powershell("Get-Process", nil); rc != 1 || !strings.Contains(e, "only drover's own PowerShell scripts") {
		t.Fatalf("foreign script: %q %d", e, rc)
	}
	if _, e, rc := w.run("notepad.exe", nil); rc != 1 || !strings.Contains(e, "'notepad.exe' is not recognized") {
		t.Fatalf("bare command line: %q %d", e, rc)
	}
}
