package activities

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// needSudoTo skips unless this test runs as root with sudo and account.
func needSudoTo(t *testing.T, account string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to switch to another account")
	}
	if _, err := exec.LookPath("sudo"); err != nil {
		t.Skip("needs sudo")
	}
	if _, err := user.Lookup(account); err != nil {
		t.Skipf("needs the account %s", account)
	}
}

// watchEntry is a resident process named name, alive with its pid file in dir.
func watchEntry(t *testing.T, dir, name string) WatchEntry {
	t.Helper()
	p := startNamed(t, dir, name)
	pidFile := filepath.Join(dir, name+".pid")
	must(t, os.WriteFile(pidFile, []byte(strconv.Itoa(p.Process.Pid)+"\n"), 0o644))
	spec := policies.WithDefaults(proc.Spec{ProcName: name, SetupPath: dir, PidPath: pidFile, AutoType: proc.AutoResident})
	return WatchEntry{Process: proc.ProcessID{Namespace: "t", Name: name}, Spec: spec}
}

// poll runs one watch poll of entries on this machine, logged in as root,
// and returns what the watch would report. bound ends the poll as a
// host's poll ends at policies.WatchPollTimeout.
func poll(t *testing.T, entries []WatchEntry, health, bound time.Duration) []WatchEvent {
	t.Helper()
	plat := linuxPlatform{login: "root"}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	c := plat.watchScript(entries, health, nil, nil)
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", c.Script, "drover"}, c.Args...)...)
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("poll did not finish within %s: %v\n%s", bound, err, out)
	}
	return newWatcher(WatchInput{Entries: entries}, plat).observe(string(out))
}

// TestWatchChecksHealthAndConfigAsTheAccount: health_cmd and the configmap
// md5 see what the spec's account sees, as its start and stop do, not
// what the (root) login user sees. A file the account cannot read says
// nothing, as repair (reading as the account) cannot judge it either; a
// file that is gone is drift.
func TestWatchChecksHealthAndConfigAsTheAccount(t *testing.T) {
	const account = "nobody"
	needSudoTo(t, account)
	dir := t.TempDir()
	// t.TempDir's parent is private too.
	must(t, os.Chmod(filepath.Dir(dir), 0o755))
	must(t, os.Chmod(dir, 0o755))
	e := watchEntry(t, dir, "proc-test")
	e.Spec.Account = account
	e.Spec.HealthCmd = `test "$(id -un)" = ` + account
	sum := md5.Sum([]byte("port=80\n"))
	registered := hex.EncodeToString(sum[:])
	// Each differs from the registered md5, as root reads it: root would
	// report all three.
	conf := filepath.Join(dir, "app.conf") // readable by root only
	must(t, os.WriteFile(conf, []byte("port=81\n"), 0o600))
	private := filepath.Join(dir, "private")
	must(t, os.Mkdir(private, 0o700))
	hidden := filepath.Join(private, "app.conf") // in a directory only root may search
	must(t, os.WriteFile(hidden, []byte("port=81\n"), 0o644))
	gone := filepath.Join(dir, "gone.conf")
	e.Spec.ConfigMap = []proc.ConfigFile{{Path: conf, MD5: registered}, {Path: hidden, MD5: registered}, {Path: gone, MD5: registered}}

	evs := poll(t, []WatchEntry{e}, policies.HealthCheckTimeout, policies.WatchPollTimeout)
	if len(evs) != 1 || evs[0].Kind != WatchDrift || len(evs[0].Drifted) != 1 || evs[0].Drifted[0] != gone {
		t.Fatalf("want only the drift of %s, which is gone, and nothing of the files %s cannot read; got %+v", gone, account, evs)
	}

	// Readable by the account, its content is read and differs.
	must(t, os.Chmod(conf, 0o644))
	e.Drifted = evs[0].Drifted
	evs = poll(t, []WatchEntry{e}, policies.HealthCheckTimeout, policies.WatchPollTimeout)
	if len(evs) != 1 || evs[0].Kind != WatchDrift || strings.Join(evs[0].Drifted, " ") != conf+" "+gone {
		t.Fatalf("want the drift of %s and %s; got %+v", conf, gone, evs)
	}

	// With the registered content back, it matches; and the health check
	// still passes only as the account.
	must(t, os.WriteFile(conf, []byte("port=80\n"), 0o644))
	must(t, os.WriteFile(gone, []byte("port=80\n"), 0o644))
	e.Drifted = evs[0].Drifted
	evs = poll(t, []WatchEntry{e}, policies.HealthCheckTimeout, policies.WatchPollTimeout)
	if len(evs) != 1 || evs[0].Kind != WatchDrift || len(evs[0].Drifted) != 0 {
		t.Fatalf("want the config restored and the process healthy as %s; got %+v", account, evs)
	}
}

// TestWatchSlowHealthChecksTimeOutAlone: health checks that hang are each
// ended at their own bound and reported by name, while the poll still
// answers for every process; checks run one after another would have held
// the poll past its bound.
func TestWatchSlowHealthChecksTimeOutAlone(t *testing.T) {
	dir := t.TempDir()
	const slow = 5
	var entries []WatchEntry
	for i := 0; i <= slow; i++ {
		e := watchEntry(t, dir, fmt.Sprintf("svc%d", i))
		e.Spec.HealthCmd = "sleep 300"
		if i == slow {
			e.Spec.HealthCmd = "exit 0"
		}
		entries = append(entries, e)
	}
	// The same ratio as a real poll's: WatchPollTimeout is three health
	// check bounds.
	health := time.Second
	bound := health * (policies.WatchPollTimeout / policies.HealthCheckTimeout)
	evs := poll(t, entries, health, bound)
	if len(evs) != slow {
		t.Fatalf("want %d events, one per hung check; got %+v", slow, evs)
	}
	for i, ev := range evs {
		name := entries[i].Spec.ProcName
		if ev.Index != i || ev.Kind != WatchUnhealthy || !strings.Contains(ev.Detail, name+" timed out") {
			t.Errorf("event %d: want %s unhealthy, timed out; got %+v", i, name, ev)
		}
	}
}

// TestUnhealthyReadsTheCheckStatus: what each health check status means.
func TestUnhealthyReadsTheCheckStatus(t *testing.T) {
	for status, want := range map[string]string{
		"":     "",
		"0":    "",
		"sudo": "",
		"1":    "health_cmd of svc failed (exit 1)",
		"124":  "health_cmd of svc timed out after 10s",
		"137":  "health_cmd of svc timed out after 10s",
	} {
		if got := unhealthy(status, "svc"); got != want {
			t.Errorf("status %q: %q, want %q", status, got, want)
		}
	}
}

// TestWatchReportsTheCrontabZone: a watch of a crontab process returns
// when the zone rules are read in is not the one the host workflow uses:
// the host's, as its poll reported it, or the operator's.
func TestWatchReportsTheCrontabZone(t *testing.T) {
	cron := WatchEntry{Spec: proc.Spec{ProcName: "job", AutoType: proc.AutoPeriodic, CrontabRule: "0 9 * * *"}}
	resident := WatchEntry{Spec: proc.Spec{ProcName: "svc", AutoType: proc.AutoResident}}
	cst := policies.Zone{Name: "CST", Offset: 8 * 3600, Known: true}
	india, err := LoadZone("+05:30")
	must(t, err)
	cases := []struct {
		name    string
		entries []WatchEntry
		in      policies.Zone
		loc     *time.Location
		op      string
		host    string
		want    *policies.Zone
	}{
		{name: "no crontab process: the zone does not matter", entries: []WatchEntry{resident}, host: "CST+0800"},
		{name: "learned from the host", entries: []WatchEntry{resident, cron}, host: "CST+0800", want: &cst},
		{name: "unchanged: nothing to report", entries: []WatchEntry{cron}, in: cst, host: "CST+0800"},
		{name: "the host's offset changed", entries: []WatchEntry{cron}, in: cst, host: "CST+0900",
			want: &policies.Zone{Name: "CST", Offset: 9 * 3600, Known: true}},
		{name: "the host said nothing readable", entries: []WatchEntry{cron}, host: "CST"},
		{name: "the operator's zone wins", entries: []WatchEntry{cron}, in: cst, loc: india, op: "+05:30", host: "CST+0800",
			want: &policies.Zone{Name: "+05:30", Offset: 5*3600 + 1800, Known: true}},
	}
	for _, c := range cases {
		w := newWatcher(WatchInput{Entries: c.entries, Zone: c.in, TimeZone: c.op}, linuxPlatform{})
		w.loc, w.hostZone = c.loc, c.host
		got := w.zoneChange()
		if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if _, err := LoadZone("Mars/Olympus"); err == nil {
		t.Error("an unknown zone name must be refused")
	}
}

// TestWatchHungConfigFileSaysNothing: a configmap path that never answers
// (a FIFO with no writer) is ended at its bound and decides nothing this
// poll, while the poll still reports a missing config file as drift.
func TestWatchHungConfigFileSaysNothing(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "app.conf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "gone.conf")
	var entries []WatchEntry
	for i, path := range []string{fifo, fifo, fifo, fifo, missing} {
		e := watchEntry(t, dir, fmt.Sprintf("svc%d", i))
		e.Spec.ConfigMap = []proc.ConfigFile{{Path: path, MD5: "0123456789abcdef0123456789abcdef"}}
		entries = append(entries, e)
	}
	health := time.Second
	evs := poll(t, entries, health, health*(policies.WatchPollTimeout/policies.HealthCheckTimeout))
	if len(evs) != 1 || evs[0].Index != 4 || evs[0].Kind != WatchDrift || len(evs[0].Drifted) != 1 || evs[0].Drifted[0] != missing {
		t.Fatalf("want only the drift of the missing file; got %+v", evs)
	}
}
