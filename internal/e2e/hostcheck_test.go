package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// checkOutput is `starter hosts check -o json`.
type checkOutput struct {
	TaskID string `json:"task_id"`
	Passed int    `json:"passed"`
	Failed int    `json:"failed"`
	Hosts  []struct {
		Host    string            `json:"host"`
		Code    proc.Code         `json:"error_code"`
		Message string            `json:"error_msg"`
		Report  *proc.CheckReport `json:"report"`
	} `json:"hosts"`
	Failures []struct {
		Code  proc.Code `json:"error_code"`
		Fix   string    `json:"fix"`
		Hosts []string  `json:"hosts"`
	} `json:"failures"`
}

func (e *env) hostsCheck(args ...string) (checkOutput, string, int) {
	e.t.Helper()
	out, errOut, code := e.starter("", append([]string{"hosts", "check", "-o", "json"}, args...)...)
	var c checkOutput
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		e.t.Fatalf("hosts check: exit %d, output is not its JSON (%v)\n%s%s", code, err, out, errOut)
	}
	return c, errOut, code
}

// TestHostsCheckFindsEachFailure: on a bed with one host of each failure,
// `starter hosts check` answers each host its own code, says what passed
// and what failed, and groups the failures by code, each with its fix.
func TestHostsCheckFindsEachFailure(t *testing.T) {
	e, wins := newWinEnv(t, 5, nil, testbed.WinOptions{})
	h := e.bed.Hosts
	healthy, down, rekeyed, refused, noSudo := h[0], h[1], h[2], h[3], h[4]
	win := wins[0]
	wrongKey := filepath.Join(t.TempDir(), "wrong_key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", wrongKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	entry := func(ip string, more ...any) map[string]any {
		m := map[string]any{"ip": ip, "bk_cloud_id": 0, "bk_supplier_id": 0}
		for i := 0; i+1 < len(more); i += 2 {
			m[more[i].(string)] = more[i+1]
		}
		return m
	}
	winEntry := entry(win.IP, "transport", "winrm", "port", win.Port, "user", win.User, "password_env", winPwEnv)
	hosts := []map[string]any{
		entry(healthy.IP), entry(down.IP), entry(rekeyed.IP),
		entry(refused.IP, "identity_file", wrongKey),
		// Logs in as drover-app, which has no sudo rule.
		entry(noSudo.IP, "user", testbed.AppUser),
		winEntry,
	}
	// The workers' inventory no longer has the host the starter still
	// lists (an identity on the healthy host's sshd).
	const removed = "10.77.0.1"
	e.writeInventory(hosts, nil)
	e.startWorker()
	e.writeInventory(append(hosts, entry(removed, "address", healthy.IP)), nil)

	// The healthy host runs app as drover-app; the host without sudo runs
	// its process as root; both through sudo from their login.
	app := sampleSpec("app", "worker")
	app.Account = testbed.AppUser
	e.register("app", "worker", app, proc.Target{IP: healthy.IP})
	asRoot := sampleSpec("gse", "agent")
	asRoot.Account = "root"
	e.register("gse", "agent", asRoot, proc.Target{IP: noSudo.IP})
	// Nothing has connected to these two yet: the key changes before the
	// first dial, and the sshd stops.
	if err := rekeyed.RotateHostKey(); err != nil {
		t.Fatal(err)
	}
	if err := down.Stop(); err != nil {
		t.Fatal(err)
	}

	c, _, code := e.hostsCheck()
	if code != cli.ExitHostsFailed {
		t.Fatalf("exit %d, want %d (hosts failed)", code, cli.ExitHostsFailed)
	}
	e.recordHistory(c.TaskID, "operate-check")
	want := map[string]proc.Code{
		healthy.IP: proc.CodeSuccess, down.IP: proc.CodeUnreachable, rekeyed.IP: proc.CodeHostKey,
		refused.IP: proc.CodeAuthFailed, noSudo.IP: proc.CodeSudoRefused, removed: proc.CodeUnknownHost,
		win.IP: proc.CodeSuccess,
	}
	if len(c.Hosts) != len(want) || c.Passed != 2 || c.Failed != 5 {
		t.Fatalf("%d hosts, %d passed, %d failed; want %d, 2, 5", len(c.Hosts), c.Passed, c.Failed, len(want))
	}
	got := map[string]string{}
	for _, r := range c.Hosts {
		ip := strings.TrimPrefix(r.Host, "0:")
		if r.Code != want[ip] {
			t.Errorf("%s: %d (%s), want %d", ip, r.Code, r.Message, want[ip])
		}
		got[ip] = r.Message
		if r.Report != nil {
			got[ip] = fmt.Sprintf("%s | passed %q | failed %+v", r.Message, r.Report.Passed, r.Report.Failed)
		}
	}
	// What passed and what failed, in each host's own words.
	for ip, parts := range map[string][]string{
		healthy.IP: {"passed: reach " + healthy.IP + ":22, host key, login as root, account drover-app"},
		down.IP:    {"host unreachable", "failed: reach " + down.IP + ":22"},
		rekeyed.IP: {"host key", "passed: reach " + rekeyed.IP + ":22; failed: host key"},
		refused.IP: {"authentication refused", "passed: reach " + refused.IP + ":22, host key; failed: login as root"},
		noSudo.IP:  {"sudo to root refused", "passed: reach " + noSudo.IP + ":22, host key, login as drover-app; failed: account root"},
		removed:    {"not in the inventory"},
		win.IP:     {"passed: reach " + win.IP + ":" + strconv.Itoa(win.Port) + ", login as " + win.User},
	} {
		for _, p := range parts {
			if !strings.Contains(got[ip], p) {
				t.Errorf("%s: %q lacks %q", ip, got[ip], p)
			}
		}
	}
	wantFix := map[proc.Code]string{
		proc.CodeUnreachable: "cannot connect", proc.CodeHostKey: "update known_hosts (ssh-keygen -R HOST",
		proc.CodeAuthFailed: "login refused: check identity_file", proc.CodeSudoRefused: "sudo refused for root: add a sudoers rule",
		proc.CodeUnknownHost: "not in the workers' inventory",
	}
	if len(c.Failures) != len(wantFix) {
		t.Fatalf("failures %+v, want one group for each of %v", c.Failures, wantFix)
	}
	for _, f := range c.Failures {
		if !strings.Contains(f.Fix, wantFix[f.Code]) || len(f.Hosts) != 1 {
			t.Errorf("group %d: %+v, want one host and a fix with %q", f.Code, f, wantFix[f.Code])
		}
	}

	// The table: the failing hosts, one a line, then the groups with their
	// fix, one a line.
	out, _, code := e.starter("", "hosts", "check")
	if code != cli.ExitHostsFailed {
		t.Fatalf("table: exit %d\n%s", code, out)
	}
	t.Logf("starter hosts check:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, want := range []string{
		"0:" + down.IP + " +117 +host unreachable",
		"0:" + noSudo.IP + " +9103 +sudo refused",
		"7 hosts checked: 2 passed, 5 failed",
		"117 host unreachable +1 host +cannot connect",
		"9101 authentication refused +1 host +login refused",
		"9102 host key verification failed +1 host +host key changed",
		"9103 sudo refused +1 host +sudo refused for root",
		"9104 host not in inventory +1 host +not in the workers' inventory",
	} {
		if !anyLineMatches(lines, want) {
			t.Errorf("table lacks a line like %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0:"+healthy.IP+" ") {
		t.Errorf("the table lists a host that passed:\n%s", out)
	}

	// Fixed, the healthy host alone passes, and the check exits 0.
	c, _, code = e.hostsCheck("--hosts", healthy.IP+","+win.IP)
	if code != cli.ExitOK || c.Passed != 2 || c.Failed != 0 || len(c.Failures) != 0 {
		t.Fatalf("healthy hosts: exit %d, %+v", code, c)
	}
}

func anyLineMatches(lines []string, pattern string) bool {
	for _, l := range lines {
		if matched, _ := regexp.MatchString(pattern, l); matched {
			return true
		}
	}
	return false
}

// TestHostsCheckTimeAgainstStatus times `starter hosts check` against
// `starter status` on the same identities (DROVER_HOSTCHECK_IDENTITIES,
// 100, sharing DROVER_HOSTCHECK_SSHD sshd hosts, 2), each of whose
// processes runs as drover-app, so the check also goes through sudo. It
// logs both times and their ratio, and asserts only that both answered
// every identity, each either passing or running out of time under the
// machine's load. `make test-hostcheck-scale` runs it at 1,000 identities on
// 10 sshd hosts.
func TestHostsCheckTimeAgainstStatus(t *testing.T) {
	n, sshd := envCount("DROVER_HOSTCHECK_IDENTITIES", 100), envCount("DROVER_HOSTCHECK_SSHD", 2)
	e := newEnv(t, sshd)
	for _, h := range e.bed.Hosts {
		if _, err := h.StartSample("fleet", "svc", testbed.AppUser); err != nil {
			t.Fatal(err)
		}
	}
	spec := sampleSpec("fleet", "svc")
	spec.Account = testbed.AppUser
	var hosts []map[string]any
	var items []proc.Item
	for i := 0; i < n; i++ {
		ip := fmt.Sprintf("10.8.%d.%d", i/250, i%250+1)
		hosts = append(hosts, map[string]any{"ip": ip, "bk_cloud_id": 0, "bk_supplier_id": 0, "address": e.bed.Hosts[i%sshd].IP})
		items = append(items, proc.Item{Target: proc.Target{IP: ip}, Process: proc.ProcessID{Namespace: "fleet", Name: "svc"}, Spec: &spec})
	}
	e.writeInventory(hosts, nil)
	if n > 200 {
		// The dev server goes with the test binary: deleting a large
		// fleet's host workflows one by one would only cost time.
		for _, it := range items {
			delete(e.hostIDs, workflows.HostWorkflowID(it.Target.HostID()))
		}
	}
	e.startWorker()
	// The harness's register allows a few hosts' time; a fleet's takes
	// longer on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	regID := gseapi.NewTaskID(time.Now())
	if err := engine.StartOperate(ctx, e.client, e.cfg.TaskQueue, workflows.OperateInput{TaskID: regID, Op: proc.OpSpecRegister, Items: items}); err != nil {
		t.Fatal(err)
	}
	reg, err := engine.WaitOperateAll(ctx, e.client, regID)
	if err != nil || len(reg.Results) != n || proc.CountFailed(reg.Results) != 0 {
		t.Fatalf("register: %v, %d results of %d", err, len(reg.Results), n)
	}

	// Every identity is answered by both. What the machine's load explains
	// is counted and logged: a command or connection that ran out of time
	// (9105), a registry read that did (9199, "deadline exceeded"). Any
	// other failure on this healthy bed fails the test.
	answered := func(op string, rows map[string]proc.HostResult) {
		loaded := map[proc.Code]int{}
		for key, r := range rows {
			switch {
			case r.Code == proc.CodeSuccess:
			case r.Code == proc.CodeTimeout, r.Code == proc.CodeInternal && strings.HasSuffix(r.Message, "deadline exceeded"):
				if loaded[r.Code]++; loaded[r.Code] == 1 {
					t.Logf("%s: under load, e.g. %s: %d %s", op, key, r.Code, r.Message)
				}
			default:
				t.Fatalf("%s: %s answered %d: %s", op, key, r.Code, r.Message)
			}
		}
		if len(rows) != n {
			t.Fatalf("%s: %d identities answered, want %d", op, len(rows), n)
		}
		if len(loaded) > 0 {
			t.Logf("%s: identities that ran out of time, by code: %v", op, loaded)
		}
	}
	status := func() time.Duration {
		began := time.Now()
		out, errOut, _ := e.starter("", "status", "--namespace", "fleet", "--name", "svc", "--hosts", "all", "-o", "json")
		took := time.Since(began)
		var list []proc.KeyedResult
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("status: %v\n%s", err, errOut)
		}
		answered("status", proc.ByKey(list))
		return took
	}
	check := func() time.Duration {
		began := time.Now()
		c, _, _ := e.hostsCheck()
		took := time.Since(began)
		rows := map[string]proc.HostResult{}
		for _, h := range c.Hosts {
			rows[h.Host] = proc.HostResult{Code: h.Code, Message: h.Message}
		}
		answered("hosts check", rows)
		return took
	}
	// The first op pays for the worker's connections; each kind is then
	// timed twice, in turn.
	status()
	var st, ck time.Duration
	for range 2 {
		st += status()
		ck += check()
	}
	t.Logf("%d identities on %d sshd hosts: status %s, hosts check %s (mean of 2 each): check/status = %.2f",
		n, sshd, (st / 2).Round(time.Millisecond), (ck / 2).Round(time.Millisecond), float64(ck)/float64(st))
}

// envCount is a positive count from the environment, else def.
func envCount(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
