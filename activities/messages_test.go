package activities

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// localRunner runs every command as its rendered sh command line, with
// this machine's sh, as sshd would on a host, with extra environment;
// reply, when set, answers instead.
type localRunner struct {
	env   []string
	reply *transport.Result
}

func (l localRunner) Run(ctx context.Context, _ inventory.Host, cmd transport.Command) (transport.Result, error) {
	if l.reply != nil {
		return *l.reply, nil
	}
	c := exec.CommandContext(ctx, "sh", "-c", transport.ShellCommand(cmd))
	c.Env = append(os.Environ(), l.env...)
	var out, errOut strings.Builder
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return transport.Result{}, err
	}
	return transport.Result{Stdout: []byte(out.String()), Stderr: []byte(errOut.String()), ExitCode: c.ProcessState.ExitCode()}, nil
}

// leftVerb finds what an unformatted or mis-formatted message keeps: a
// verb (%s, %d, %v...) or fmt's %!verb(...) complaint.
var leftVerb = regexp.MustCompile(`%[-+#0]*[0-9.]*[sdvqxXfgtT]|%!`)

// checkMessage is what an operator needs of a per-host message: one line,
// no format verbs, and the real values.
func checkMessage(t *testing.T, name string, got proc.HostResult, code proc.Code, wants ...string) {
	t.Helper()
	if got.Code != code {
		t.Errorf("%s: code %d, want %d (%q)", name, got.Code, code, got.Message)
	}
	if strings.ContainsAny(got.Message, "\r\n") {
		t.Errorf("%s: message is not one line: %q", name, got.Message)
	}
	if leftVerb.MatchString(got.Message) {
		t.Errorf("%s: message keeps a format verb: %q", name, got.Message)
	}
	for _, w := range wants {
		if !strings.Contains(got.Message, w) {
			t.Errorf("%s: message %q lacks %q", name, got.Message, w)
		}
	}
}

// TestEveryScriptMessageIsOneLineWithRealValues drives the control and
// probe scripts through HostOp against this machine, into each way they
// can fail, and checks the message an operator reads.
func TestEveryScriptMessageIsOneLineWithRealValues(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	must(t, os.WriteFile(file, []byte("x"), 0o644))
	missing := filepath.Join(dir, "gse")
	target := proc.Target{IP: "10.0.0.1"}
	spec := func(setup string, edit func(*proc.Spec)) proc.Spec {
		s := proc.Spec{ProcName: "svc", SetupPath: setup, PidPath: filepath.Join(dir, "svc.pid"), Account: me.Username,
			AutoType: proc.AutoResident, StartCheck: time.Millisecond, StopCheck: time.Millisecond}
		if edit != nil {
			edit(&s)
		}
		return s
	}
	withCmd := func(c string) func(*proc.Spec) { return func(s *proc.Spec) { s.StartCmd = c } }
	for _, c := range []struct {
		name   string
		op     proc.OpType
		spec   proc.Spec
		runner localRunner
		code   proc.Code
		wants  []string
	}{
		// The case: a restart by the job platform's convention where
		// setup_path does not exist.
		{"restart, setup_path missing", proc.OpRestart, spec(missing, nil), localRunner{}, proc.CodeBadSpec,
			[]string{"setup_path " + missing + " does not exist on this host"}},
		{"start, setup_path missing", proc.OpStart, spec(missing, withCmd("./run")), localRunner{}, proc.CodeBadSpec,
			[]string{"setup_path " + missing + " does not exist on this host"}},
		{"start, setup_path a file", proc.OpStart, spec(file, withCmd("./run")), localRunner{}, proc.CodeBadSpec,
			[]string{"setup_path " + file + " is not a directory on this host"}},
		{"start, no temporary file", proc.OpStart, spec(dir, withCmd("true")), localRunner{env: []string{"TMPDIR=" + missing}},
			proc.CodeCommandFailed, []string{"start command not run: no temporary file"}},
		{"start, command fails with lines", proc.OpStart, spec(dir, withCmd(`printf 'first\r\n\n  second  \n'; exit 3`)), localRunner{},
			proc.CodeCommandFailed, []string{"start command exited 3: first | second"}},
		{"start, command fails silently", proc.OpStart, spec(dir, withCmd("exit 5")), localRunner{}, proc.CodeCommandFailed,
			[]string{"start command exited 5 with no output"}},
		{"start, command past op_timeout", proc.OpStart, spec(dir, func(s *proc.Spec) { s.StartCmd, s.OpTimeout = "sleep 30", time.Second }),
			localRunner{}, proc.CodeTimeout, []string{"start command ran past op_timeout 1s"}},
		{"start, not alive after", proc.OpStart, spec(dir, withCmd("true")), localRunner{}, proc.CodePostCheck,
			[]string{"start process (svc) failed"}},
		{"status, not running", proc.OpStatus, spec(dir, nil), localRunner{}, proc.CodeNotRunning, []string{"process(svc) is not running"}},
		{"stop, not running", proc.OpStop, spec(dir, nil), localRunner{}, proc.CodeNotRunning, []string{"svc"}},
		{"kill, not running", proc.OpKill, spec(dir, nil), localRunner{}, proc.CodeNotRunning, []string{"svc"}},
		{"reload, no reload_cmd", proc.OpReload, spec(dir, withCmd("true")), localRunner{}, proc.CodeBadSpec, []string{"svc has no reload_cmd"}},
		{"bat on an ssh host", proc.OpStart, spec(dir, func(s *proc.Spec) { s.ShellExt = proc.ShellBat }), localRunner{}, proc.CodeBadSpec,
			[]string{`cmd_shell_ext "bat"`, "10.0.0.1 is reached over ssh"}},
		{"probe as another account", proc.OpStatus, spec(dir, func(s *proc.Spec) { s.Account = "nobody-else" }), localRunner{},
			proc.CodeSudoRefused, []string{`"nobody-else"`, me.Username}},
		// The start's probe shares its exec: run as another account, it
		// starts nothing (no "ran" file below).
		{"start as another account", proc.OpStart, spec(dir, func(s *proc.Spec) { s.Account, s.StartCmd = "nobody-else", "touch ran" }), localRunner{},
			proc.CodeSudoRefused, []string{`"nobody-else"`, me.Username}},
		{"probe fails with lines", proc.OpStatus, spec(dir, nil),
			localRunner{reply: &transport.Result{ExitCode: 2, Stderr: []byte("sh: 1: bad\nsecond line\n")}}, proc.CodeCommandFailed,
			[]string{"probe exited 2: sh: 1: bad | second line"}},
		{"probe prints garbage", proc.OpStatus, spec(dir, nil), localRunner{reply: &transport.Result{Stdout: []byte("garbage\n%s\n")}},
			proc.CodeInternal, []string{"no host line"}},
	} {
		a := oneHost(t, c.runner)
		a.Sleep = func(context.Context, time.Duration) error { return nil }
		out, err := a.HostOp(context.Background(), HostOpInput{Op: c.op, Target: target, Process: proc.ProcessID{Namespace: "gse", Name: "svc"}, Spec: c.spec})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		checkMessage(t, c.name, out.Result, c.code, c.wants...)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("start as another account: its command ran")
	}
}

// TestWindowsControlTrailers reads the trailers the Windows control script
// prints when it cannot run a command (no PowerShell here to run it).
func TestWindowsControlTrailers(t *testing.T) {
	spec := proc.Spec{ProcName: "svc", SetupPath: `C:\app`, Account: "Administrator", OpTimeout: time.Minute}
	for why, want := range map[string]string{
		setupMissing: `setup_path C:\app does not exist on this host`,
		setupNotDir:  `setup_path C:\app is not a directory on this host`,
	} {
		line := trailer + " rc=97 timeout=0 setup=" + why
		if !strings.Contains(scripts["control.ps1"], `"`+line+`"`) {
			t.Errorf("the Windows control script does not print %q", line)
		}
		o, ok := parseControl(line + "\r\n")
		if !ok {
			t.Fatalf("%s: no trailer", why)
		}
		f := controlFailure("start", spec, o)
		if f == nil {
			t.Fatalf("%s: no failure", why)
		}
		checkMessage(t, why, *f, proc.CodeBadSpec, want)
	}
	o, _ := parseControl("process not created: 9\r\n\r\n" + trailer + " rc=96 timeout=0\r\n")
	checkMessage(t, "process not created", *controlFailure("start", spec, o), proc.CodeCommandFailed, "start command exited 96: process not created: 9")
}
