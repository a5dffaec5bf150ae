package activities

import (
	"crypto/md5"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
)

// hardText is what no script may read as code: a name made of it must
// reach the host as those very bytes.
const hardText = "it's \"q\" $HOME `id` $(touch pwned) *\n\tx \\ ü"

// TestScriptFilesAsTheHostsReceiveThem: every script loads with its
// includes, without comment lines, and parses; the texts Go reads back
// (trailers, markers) are the ones the scripts print.
func TestScriptFilesAsTheHostsReceiveThem(t *testing.T) {
	if len(scripts) == 0 {
		t.Fatal("no scripts embedded")
	}
	for name, text := range scripts {
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "#") {
				t.Errorf("%s keeps a comment or include line %q", name, l)
			}
		}
		switch filepath.Ext(name) {
		case ".sh":
			if out, err := exec.Command("sh", "-n", "-c", text).CombinedOutput(); err != nil {
				t.Errorf("%s does not parse: %v %s", name, err, out)
			}
		case ".ps1":
			if !strings.HasPrefix(text, "param(") {
				t.Errorf("%s does not start with its param block", name)
			}
		default:
			t.Errorf("%s: neither sh nor ps1", name)
		}
	}
	for _, why := range []string{setupMissing, setupNotDir, setupDenied} {
		if !strings.Contains(scripts["control.sh"], trailer+" rc=97 timeout=0 setup="+why+`\n`) {
			t.Errorf("control.sh does not print setup=%s", why)
		}
	}
	for _, name := range []string{"control.sh", "checked_control.sh"} {
		if !strings.Contains(scripts[name], trailer+" rc=98 timeout=0 setup="+setupNoTemp+`\n`) ||
			!strings.Contains(scripts[name], `\n`+trailer+` rc=%d timeout=%d\n`) {
			t.Errorf("%s does not print the trailer", name)
		}
	}
	if !strings.Contains(scripts["checked_control.sh"], "'"+checkMarker+`\n'`) {
		t.Error("checked_control.sh does not print the check marker")
	}
}

// TestControlScriptTakesItsArgumentsLiterally: a setup_path, a request id
// and an op marker file made of shell syntax reach control.sh as data; the
// command, the caller's shell by design, runs there.
func TestControlScriptTakesItsArgumentsLiterally(t *testing.T) {
	base := t.TempDir()
	setup := filepath.Join(base, hardText)
	must(t, os.Mkdir(setup, 0o755))
	marker := filepath.Join(base, "mark "+hardText)
	request := "T1#0 " + hardText
	c := controlScript(opMark{file: marker, request: request}, setup, `pwd; printf '%s\n' "$0"`, time.Minute, nil)
	if strings.Contains(c.Script, "pwned") || strings.Contains(c.Script, base) {
		t.Fatal("request text in the script's text")
	}
	cmd := shCommand(c)
	cmd.Dir = base
	out, err := cmd.Output()
	must(t, err)
	o, complete := parseControl(string(out))
	if !complete || o.RC != 0 || o.Output != trim(setup+"\nsh") {
		t.Fatalf("control in %q: %+v (complete %v)", setup, o, complete)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != request {
		t.Fatalf("op marker %q, %v; want %q", b, err, request)
	}
	if _, err := os.Stat(filepath.Join(base, "pwned")); err == nil {
		t.Fatal("an argument was run")
	}
	// A setup_path that is not there is reported by the trailer alone.
	out, err = shCommand(controlScript(opMark{}, filepath.Join(base, "gone "+hardText), "true", time.Minute, nil)).Output()
	must(t, err)
	if o, _ := parseControl(string(out)); o.Setup != setupMissing {
		t.Fatalf("missing setup_path: %+v", o)
	}
}

// TestStatusScriptTakesItsArgumentsLiterally: version_cmd and health_cmd
// run in a setup_path made of shell syntax; the pid file's name is data.
func TestStatusScriptTakesItsArgumentsLiterally(t *testing.T) {
	base := t.TempDir()
	setup := filepath.Join(base, hardText)
	must(t, os.Mkdir(setup, 0o755))
	must(t, os.WriteFile(filepath.Join(setup, "VERSION"), []byte("1.2.3\tbeta\nsecond\n"), 0o644))
	p := startNamed(t, base, "proc-status")
	pidFile := filepath.Join(setup, "svc "+hardText+".pid")
	must(t, os.WriteFile(pidFile, []byte(strconv.Itoa(p.Process.Pid)+"\n"), 0o644))
	spec := proc.Spec{PidPath: pidFile, SetupPath: setup, VersionCmd: "cat VERSION", HealthCmd: `test -f VERSION`}
	c := linuxPlatform{}.statusScript(spec, 0, true, nil, "")
	if c.Name != "status" || strings.Contains(c.Script, "VERSION") {
		t.Fatalf("status script %q holds request text", c.Name)
	}
	cmd := shCommand(c)
	cmd.Dir = base
	out, err := cmd.Output()
	must(t, err)
	_, samples, err := ParseProbe(string(out), 1)
	must(t, err)
	if !proc.Alive(samples[0], "proc-status") {
		t.Fatalf("the process behind %q: %+v", pidFile, samples[0])
	}
	if ex := parseExtras(string(out)); ex.Version != "1.2.3 beta" || !ex.Healthy {
		t.Fatalf("extras %+v from\n%s", ex, out)
	}
	// No version_cmd nor health_cmd: no extras lines, healthy.
	out, err = shCommand(linuxPlatform{}.statusScript(proc.Spec{PidPath: pidFile}, 0, true, nil, "")).Output()
	must(t, err)
	if strings.Contains(string(out), "\nZ\t") || !parseExtras(string(out)).Healthy {
		t.Fatalf("extras without commands:\n%s", out)
	}
}

// TestWatchScriptTakesItsArgumentsLiterally: health_cmd runs in a
// setup_path made of shell syntax, and a config file of such a name is
// summed: both through health.sh and config_md5.sh, passed as arguments.
func TestWatchScriptTakesItsArgumentsLiterally(t *testing.T) {
	dir := t.TempDir()
	setup := filepath.Join(dir, hardText)
	must(t, os.Mkdir(setup, 0o755))
	e := watchEntry(t, dir, "proc-watch")
	conf := filepath.Join(setup, "app "+hardText+".conf")
	must(t, os.WriteFile(conf, []byte("port=80\n"), 0o644))
	e.Spec.SetupPath = setup
	// Passes only in setup_path, where the config file is.
	e.Spec.HealthCmd = `test -f "./app it's"*`
	e.Spec.ConfigMap = []proc.ConfigFile{{Path: conf, MD5: "0123456789abcdef0123456789abcdef"}}
	c := linuxPlatform{login: "root"}.watchScript([]WatchEntry{e}, 5*time.Second, nil, nil)
	out := runLocal(t, c)
	if !strings.Contains(out, "Z\t0\t0\n") {
		t.Fatalf("health_cmd did not pass in %q:\n%s", setup, out)
	}
	sum := md5.Sum([]byte("port=80\n"))
	if !strings.Contains(out, "M\t0\t0\t"+hex.EncodeToString(sum[:])+"\n") {
		t.Fatalf("no md5 of %q:\n%s", conf, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatal("an argument was run")
	}
}
