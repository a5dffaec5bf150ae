package transport

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport/psenc"
)

// winHost is the inventory entry for a test double, with its password in
// the environment under pwEnv.
func winHost(t *testing.T, h *testbed.WinHost, mod func(*inventory.Host)) inventory.Host {
	t.Helper()
	t.Setenv("DROVER_TEST_WINRM_PW", h.Password)
	host := inventory.Host{IP: h.IP, Port: h.Port, Transport: inventory.TransportWinRM, User: h.User,
		PasswordEnv: "DROVER_TEST_WINRM_PW", HTTPS: h.HTTPS, CAFile: h.CAFile}
	if mod != nil {
		mod(&host)
	}
	inv, err := inventory.New("", inventory.Host{}, nil, []inventory.Host{host})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := inv.Lookup(proc.HostID{IP: h.IP})
	return got
}

func TestWinRMRunsBatAndPowerShell(t *testing.T) {
	h := testbed.NewWinHost(t, testbed.WinOptions{})
	w := NewWinRM(WinRMOptions{})
	defer w.Close()
	host := winHost(t, h, nil)
	ctx := context.Background()

	res, err := w.Run(ctx, host, Command{Shell: ShellCmd, Script: "echo hello from cmd"})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "hello from cmd\r\n" {
		t.Fatalf("echo: %+v %v", res, err)
	}
	res, err = w.Run(ctx, host, Command{Shell: ShellCmd, Script: "exit 3"})
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("exit code must come back: %+v %v", res, err)
	}
	res, err = w.Run(ctx, host, Command{Shell: ShellCmd, Script: "nosuch.exe"})
	if err != nil || res.ExitCode != 1 || !strings.Contains(string(res.Stderr), "'nosuch.exe' is not recognized") {
		t.Fatalf("stderr must come back: %+v %v", res, err)
	}

	// A ps1 script and its arguments reach the host intact, quotes and
	// all: the double decodes -EncodedCommand and runs drover's control
	// script by name with the arguments its param block takes.
	h.WriteFile(`C:\app dir\say.bat`, "echo %1 it's \"here\"\r\n")
	script := "param([string]$Setup, [string]$Shell, [string]$Cmd, [int]$TimeoutS)\nexit 0\n"
	res, err = w.Run(ctx, host, Command{Shell: ShellPowerShell, Name: "control", Script: script, Args: []string{`C:\app dir`, "bat", "say.bat ünï", "5"}})
	if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), `ünï it's "here"`) ||
		!strings.Contains(string(res.Stdout), "__drover_rc__ rc=0 timeout=0") {
		t.Fatalf("ps1: %+v %v", res, err)
	}

	st := h.Stats()
	if h.OpenShells() != 0 || st.ShellsCreated != 4 || st.ShellsDeleted != 4 || w.Stats().ShellsDeleted != 4 {
		t.Fatalf("every shell must be deleted: open %d, %+v, client %+v", h.OpenShells(), st, w.Stats())
	}
}

func TestPowerShellCommandLine(t *testing.T) {
	line := PowerShellCommandLine("Get-Process -Id 4 | % { 'a''b' }")
	const prefix = "powershell -NoProfile -NonInteractive -ExecutionPolicy Bypass -EncodedCommand "
	if !strings.HasPrefix(line, prefix) || strings.ContainsAny(line[len(prefix):], " '\"|%") {
		t.Fatalf("line %q", line)
	}
	got, err := psenc.Decode(line[len(prefix):])
	if err != nil || got != "$ProgressPreference = 'SilentlyContinue'\nGet-Process -Id 4 | % { 'a''b' }" {
		t.Fatalf("decoded %q %v", got, err)
	}
	// A script whose plain form would pass cmd.exe's limit goes compressed.
	long := "#drover:probe\n" + strings.Repeat("Get-Process -Id $id\n", 200)
	line = PowerShellCommandLine(long)
	if len(line) > maxCommandLine {
		t.Fatalf("%d characters", len(line))
	}
	got, _ = psenc.Decode(line[len(prefix):])
	if got, err = psenc.Expand(got); err != nil || got != "$ProgressPreference = 'SilentlyContinue'\n"+long {
		t.Fatalf("compressed script does not expand back: %v", err)
	}
}

func TestWinRMRefusesWhatItCannotRun(t *testing.T) {
	h := testbed.NewWinHost(t, testbed.WinOptions{})
	w := NewWinRM(WinRMOptions{})
	host := winHost(t, h, nil)
	ctx := context.Background()
	for _, c := range []struct {
		cmd  Command
		kind Kind
		want string
	}{
		{Command{Script: "echo hi"}, KindUnsupported, "not sh"},
		{Command{Shell: ShellCmd, Script: "echo a\necho b"}, KindUnsupported, "line breaks"},
		{Command{Shell: ShellCmd, Script: strings.Repeat("x", 9000)}, KindUnsupported, "exceeds cmd.exe's 8191"},
		{Command{Shell: ShellCmd, Script: "echo hi", Account: "svc-app"}, KindAuth, `no WinRM credentials for account "svc-app"`},
	} {
		_, err := w.Run(ctx, host, c.cmd)
		if KindOf(err) != c.kind || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %s %q", c.cmd, err, c.kind, c.want)
		}
	}
	// The login user, written with a domain, is the account.
	if _, err := w.Run(ctx, host, Command{Shell: ShellCmd, Script: "echo hi", Account: `WIN-HOST\` + strings.ToLower(h.User)}); err != nil {
		t.Fatalf("account equal to the login: %v", err)
	}
	if h.Stats().Commands != 1 {
		t.Fatalf("refused commands must never reach the host: %+v", h.Stats())
	}

	// SSH refuses Windows scripts before dialling anything.
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewSSH(SSHOptions{KnownHostsPath: kh})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Run(ctx, inventory.Host{IP: "127.0.0.1", Port: 1, User: "root", Transport: inventory.TransportSSH}, Command{Shell: ShellPowerShell, Script: "Get-Date"})
	if KindOf(err) != KindUnsupported || !strings.Contains(err.Error(), "not ps1") {
		t.Fatalf("ps1 over ssh: %v", err)
	}
}

func TestWinRMAuthTLSAndUnreachable(t *testing.T) {
	h := testbed.NewWinHost(t, testbed.WinOptions{HTTPS: true})
	w := NewWinRM(WinRMOptions{DialTimeout: time.Second})
	ctx := context.Background()
	bat := Command{Shell: ShellCmd, Script: "echo ok"}

	if res, err := w.Run(ctx, winHost(t, h, nil), bat); err != nil || string(res.Stdout) != "ok\r\n" {
		t.Fatalf("https with the host's CA: %+v %v", res, err)
	}
	if _, err := w.Run(ctx, winHost(t, h, func(x *inventory.Host) { x.CAFile, x.Insecure = "", true }), bat); err != nil {
		t.Fatalf("https with insecure: true: %v", err)
	}

	other := filepath.Join(t.TempDir(), "other-ca.pem")
	if err := testbed.WriteOtherCA(other); err != nil {
		t.Fatal(err)
	}
	before := h.Stats()
	_, err := w.Run(ctx, winHost(t, h, func(x *inventory.Host) { x.CAFile = other }), bat)
	if KindOf(err) != KindHostKey || !strings.Contains(err.Error(), "TLS certificate not verified against ca_file "+other) {
		t.Fatalf("wrong CA: %v", err)
	}
	if after := h.Stats(); after.ShellsCreated != before.ShellsCreated || after.AuthFailures != before.AuthFailures {
		t.Fatalf("a host not verified must get no request, not even credentials: %+v -> %+v", before, after)
	}

	t.Setenv("DROVER_TEST_WRONG_PW", "not-it")
	_, err = w.Run(ctx, winHost(t, h, func(x *inventory.Host) { x.PasswordEnv = "DROVER_TEST_WRONG_PW" }), bat)
	if KindOf(err) != KindAuth || !strings.Contains(err.Error(), "HTTP 401") || h.Stats().AuthFailures != 1 {
		t.Fatalf("wrong password: %v (auth failures %d; one try, no retry)", err, h.Stats().AuthFailures)
	}
	_, err = w.Run(ctx, winHost(t, h, func(x *inventory.Host) { x.PasswordEnv = "DROVER_TEST_UNSET_PW" }), bat)
	if KindOf(err) != KindAuth || !strings.Contains(err.Error(), `"DROVER_TEST_UNSET_PW" is not set`) {
		t.Fatalf("missing password: %v", err)
	}

	_, err = w.Run(ctx, winHost(t, h, func(x *inventory.Host) { x.Port = 1 }), bat)
	if KindOf(err) != KindUnreachable {
		t.Fatalf("closed port: %v", err)
	}
	if h.OpenShells() != 0 {
		t.Fatalf("%d shells left open", h.OpenShells())
	}
}

func TestWinRMTimeoutTerminatesAndDeletes(t *testing.T) {
	h := testbed.NewWinHost(t, testbed.WinOptions{})
	w := NewWinRM(WinRMOptions{})
	host := winHost(t, h, nil)
	h.Hang(true)
	began := time.Now()
	res, err := w.Run(context.Background(), host, Command{Shell: ShellCmd, Script: "echo never", Timeout: time.Second})
	took := time.Since(began)
	if KindOf(err) != KindTimeout || !strings.Contains(err.Error(), "remote command terminated") || res.ExitCode != -1 {
		t.Fatalf("hung command: %+v %v", res, err)
	}
	if took > 5*time.Second {
		t.Fatalf("a 1s timeout took %s", took)
	}
	st := h.Stats()
	if st.Signals != 1 || h.OpenShells() != 0 || st.ShellsDeleted != 1 || w.Stats().Terminated != 1 {
		t.Fatalf("timeout must signal and delete: open %d, %+v", h.OpenShells(), st)
	}

	// A cancelled caller gets the same cleanup.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	_, err = w.Run(ctx, host, Command{Shell: ShellCmd, Script: "echo never"})
	if KindOf(err) != KindTimeout || h.OpenShells() != 0 || h.Stats().Signals != 2 {
		t.Fatalf("cancel: %v, open %d, %+v", err, h.OpenShells(), h.Stats())
	}
	h.Hang(false)
	if res, err := w.Run(context.Background(), host, Command{Shell: ShellCmd, Script: "echo back"}); err != nil || string(res.Stdout) != "back\r\n" {
		t.Fatalf("after the hang: %+v %v", res, err)
	}

	// A caller that gives up while the host is still creating the shell:
	// the shell is deleted all the same, and no command is sent to it.
	h.SlowCreate(500 * time.Millisecond)
	commands := h.Stats().Commands
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = w.Run(ctx, host, Command{Shell: ShellCmd, Script: "echo late"})
	if KindOf(err) != KindTimeout || !strings.Contains(err.Error(), "not started") || h.OpenShells() != 0 || h.Stats().Commands != commands {
		t.Fatalf("cancelled during Create: %v, open %d, %+v", err, h.OpenShells(), h.Stats())
	}
}

func TestWinRMNTLM(t *testing.T) {
	h := testbed.NewWinHost(t, testbed.WinOptions{NTLM: true, HTTPS: true})
	w := NewWinRM(WinRMOptions{})
	ntlm := winHost(t, h, func(x *inventory.Host) { x.Auth = inventory.AuthNTLM })
	for i := 0; i < 3; i++ {
		if res, err := w.Run(context.Background(), ntlm, Command{Shell: ShellCmd, Script: "echo ntlm"}); err != nil || string(res.Stdout) != "ntlm\r\n" {
			t.Fatalf("ntlm: %+v %v", res, err)
		}
	}
	// Every request of every command (create, command, receive, signal,
	// delete) was authenticated by NTLM, none by basic.
	if st := h.Stats(); st.NTLMLogons < 15 || st.AuthFailures != 0 || h.OpenShells() != 0 {
		t.Fatalf("%+v, %d shells open", st, h.OpenShells())
	}
	t.Setenv("DROVER_TEST_WRONG_PW", "not-it")
	_, err := w.Run(context.Background(), winHost(t, h, func(x *inventory.Host) {
		x.Auth, x.PasswordEnv = inventory.AuthNTLM, "DROVER_TEST_WRONG_PW"
	}), Command{Shell: ShellCmd, Script: "echo ntlm"})
	if KindOf(err) != KindAuth || h.Stats().AuthFailures != 1 {
		t.Fatalf("wrong NTLM password: %v, %+v", err, h.Stats())
	}
}
