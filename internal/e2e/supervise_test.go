package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// supervised registers the app as a managed resident process and starts it.
func (e *env) supervised(t *testing.T, h *testbed.Host, edit func(*proc.Spec)) (proc.Item, int) {
	t.Helper()
	spec := appSpec("app")
	spec.StartRetries = 2
	spec.StartInterval = time.Second
	if edit != nil {
		edit(&spec)
	}
	it := proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "sup", Name: "svc"}, Spec: &spec}
	wantCode(t, "start managed", e.op(proc.OpStart, it), proc.CodeSuccess)
	return proc.Item{Target: it.Target, Process: it.Process}, hostPid(t, h, spec.PidPath)
}

// waitFor polls cond until it holds or the limit passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	began := time.Now()
	for !cond() {
		if time.Since(began) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(began)
}

// pollClock is a progress marker for a host workflow's supervision: a
// second copy of the app, supervised on the same host workflow, whose
// health_cmd logs every poll. A test asserting that supervision did
// nothing waits for polls to have happened rather than for time to pass;
// a host none of whose other processes is managed would otherwise not be
// polled at all, and a sleep proves nothing on a slow machine.
type pollClock struct {
	h   *testbed.Host
	log string
}

// pollClock starts the clock on the host workflow of ip, whose sshd host
// is h, under /data/<dir>. Its program is named tick, so it is never
// taken for an instance of the app under test.
func (e *env) pollClock(t *testing.T, ip string, h *testbed.Host, dir string) pollClock {
	t.Helper()
	installNamedApp(t, h, dir, "tick")
	c := pollClock{h: h, log: "/data/" + dir + "/polls.log"}
	spec := appSpec(dir)
	spec.ProcName, spec.PidPath = "tick", "/data/"+dir+"/tick.pid"
	spec.HealthCmd = "echo poll >> " + c.log
	it := proc.Item{Target: proc.Target{IP: ip}, Process: proc.ProcessID{Namespace: "clock", Name: dir}, Spec: &spec}
	wantCode(t, "start the poll clock", e.op(proc.OpStart, it), proc.CodeSuccess)
	return c
}

func (c pollClock) polls(t *testing.T) int {
	t.Helper()
	out, _ := c.h.Exec("grep -c poll " + c.log + " 2>/dev/null || true")
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n
}

// awaitPolls waits until every clock has seen two more polls (see await).
func awaitPolls(t *testing.T, clocks []pollClock) {
	t.Helper()
	from := make([]int, len(clocks))
	for i, c := range clocks {
		from[i] = c.polls(t)
	}
	waitFor(t, 30*time.Second, "two more supervision polls of every host", func() bool {
		for i, c := range clocks {
			if c.polls(t) < from[i]+2 {
				return false
			}
		}
		return true
	})
}

// await waits until the host has been polled twice more: at least one
// whole poll began after the call, and whatever supervision decided on
// the first poll was carried out before the second, both riding the same
// host workflow.
func (c pollClock) await(t *testing.T) {
	t.Helper()
	awaitPolls(t, []pollClock{c})
}

// entry is the host workflow's registry entry for p on the host of ip.
func (e *env) entry(t *testing.T, ip string, p proc.ProcessID) workflows.Entry {
	t.Helper()
	var entries []workflows.Entry
	if _, err := engine.QueryOpen(context.Background(), e.client, workflows.HostWorkflowID(proc.HostID{IP: ip}), workflows.RegistryQuery, &entries); err != nil {
		t.Fatalf("registry of %s: %v", ip, err)
	}
	for _, en := range entries {
		if en.Process == p {
			return en
		}
	}
	t.Fatalf("%s not registered on %s: %+v", p, ip, entries)
	return workflows.Entry{}
}

// events returns the host workflow's supervision events.
func (e *env) events(t *testing.T, h *testbed.Host) []workflows.Event {
	t.Helper()
	return e.hostEvents(t, proc.HostID{IP: h.IP})
}

func (e *env) hostEvents(t *testing.T, id proc.HostID) []workflows.Event {
	t.Helper()
	var evs []workflows.Event
	if err := engine.Query(context.Background(), e.client, workflows.HostWorkflowID(id), workflows.EventsQuery, &evs); err != nil {
		t.Fatalf("events query: %v", err)
	}
	return evs
}

func countKind(evs []workflows.Event, kind string) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

func (e *env) hasEvent(t *testing.T, h *testbed.Host, kind string) func() bool {
	return func() bool { return countKind(e.events(t, h), kind) > 0 }
}

// liveNewPid waits for the app's pid file to name a live pid other than old.
func liveNewPid(t *testing.T, h *testbed.Host, old int) func() bool {
	return func() bool {
		p := hostPid(t, h, "/data/app/svc.pid")
		return p != 0 && p != old && hostAlive(h, p)
	}
}

func TestSuperviseRestartsAKilledProcess(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	e.cfg.MetricsListen = "127.0.0.1:0"
	e.startWorker()
	it, pid := e.supervised(t, h, nil)
	before := time.Now().Unix()
	time.Sleep(1100 * time.Millisecond) // so last_start_time can move
	if _, err := h.Exec(fmt.Sprintf("kill -9 %d", pid)); err != nil {
		t.Fatal(err)
	}
	// Bound: one poll interval (1 s) to notice, start_check (1 s) to confirm.
	took := waitFor(t, 10*time.Second, "restart after kill -9", liveNewPid(t, h, pid))
	t.Logf("kill -9 to a new live pid: %s", took.Round(time.Millisecond))
	waitFor(t, 5*time.Second, "restart event", e.hasEvent(t, h, workflows.EventRestartSuccess))
	newPid := hostPid(t, h, "/data/app/svc.pid")
	e.recordHistory(workflows.HostWorkflowID(proc.HostID{IP: h.IP}), "host-restart")

	// The worker's /metrics tells the same story; the SDK's scope reports
	// each second.
	var m map[string]float64
	restarts := func() float64 {
		return sumSeries(m, "drover_supervision_events{", `event="process_restart_success"`, `workflow_type="Host"`)
	}
	waitFor(t, 5*time.Second, "restart in /metrics", func() bool { m = scrape(t, e.worker.MetricsAddr); return restarts() == 1 })
	if m["drover_hosts_reachable"] != 1 || m["drover_hosts_unreachable"] != 0 || m["drover_ssh_handshakes_total"] < 1 ||
		m["drover_ssh_pool_hits_total"] < 1 || sumSeries(m, "temporal_activity_execution_latency_count{", `activity_type="HostOp"`) < 1 {
		t.Fatalf("metrics after one restart: reachable=%v unreachable=%v handshakes=%v pool_hits=%v", m["drover_hosts_reachable"],
			m["drover_hosts_unreachable"], m["drover_ssh_handshakes_total"], m["drover_ssh_pool_hits_total"])
	}

	body, _ := json.Marshal(map[string]any{"meta": map[string]any{"namespace": "sup", "name": "svc"},
		"hosts": []map[string]any{{"ip": h.IP, "bk_cloud_id": 0, "bk_supplier_id": 0}}})
	out, errOut, code := e.starter(string(body), "api", "get_proc_status")
	var resp struct {
		Result bool `json:"result"`
		Data   struct {
			ProcInfos []struct {
				Flag, Status  int
				IsAuto        bool  `json:"isauto"`
				Pid           int   `json:"pid"`
				LastStartTime int64 `json:"last_start_time"`
				RegisterTime  int64 `json:"register_time"`
			} `json:"proc_infos"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || code != 0 || len(resp.Data.ProcInfos) != 1 {
		t.Fatalf("get_proc_status: exit %d %v\n%s%s", code, err, out, errOut)
	}
	pi := resp.Data.ProcInfos[0]
	if pi.Pid != newPid || pi.Flag != 1 || pi.Status != 1 || !pi.IsAuto || pi.LastStartTime <= before || pi.RegisterTime == 0 {
		t.Fatalf("get_proc_status after restart: %+v, want pid %d and a last_start_time after %d", pi, newPid, before)
	}

	// sync_proc_status pages the namespace from the registries.
	out, errOut, code = e.starter(`{"meta":{"namespace":"sup"},"page":{"start":0,"limit":10}}`, "api", "sync_proc_status")
	var sync struct {
		Data struct {
			Count     int `json:"count"`
			ProcInfos []struct {
				Pid  int `json:"pid"`
				Meta struct {
					Name string `json:"name"`
				} `json:"meta"`
			} `json:"proc_infos"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &sync); err != nil || code != 0 || sync.Data.Count != 1 ||
		len(sync.Data.ProcInfos) != 1 || sync.Data.ProcInfos[0].Pid != newPid || sync.Data.ProcInfos[0].Meta.Name != it.Process.Name {
		t.Fatalf("sync_proc_status: exit %d %v\n%s%s", code, err, out, errOut)
	}

	// The event through the CLI, filtered.
	out, errOut, code = e.starter("", "events", "--kind", "process_restart", "--namespace", "sup", "-o", "json")
	var evs []workflows.Event
	if err := json.Unmarshal([]byte(out), &evs); err != nil || code != 0 || len(evs) != 1 || evs[0].Kind != workflows.EventRestartSuccess || evs[0].Pid != newPid {
		t.Fatalf("starter events: exit %d %v\n%s%s", code, err, out, errOut)
	}
	out, _, _ = e.starter("", "events", "--kind", "process_cancel_restart", "-o", "json")
	if strings.TrimSpace(out) != "[]" {
		t.Fatalf("the kind filter let through: %s", out)
	}
}

func TestSuperviseGivesUpAfterRetries(t *testing.T) {
	t.Parallel() // it mostly waits
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	// Once "broken" exists, start.sh starts nothing.
	if _, err := h.Exec(`sed -i '2i echo attempt >> /data/app/attempts.log; [ -e /data/app/broken ] \&\& exit 0' /data/app/start.sh`); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	clock := e.pollClock(t, h.IP, h, "clock")
	_, pid := e.supervised(t, h, func(s *proc.Spec) { s.StartRetries = 3 })
	if _, err := h.Exec(fmt.Sprintf("touch /data/app/broken; kill -9 %d", pid)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 40*time.Second, "management cancelled", func() bool {
		evs := e.events(t, h)
		if countKind(evs, workflows.EventCancelRestart) > 0 {
			return true
		}
		t.Logf("events so far: %+v", evs)
		return false
	})
	evs := e.events(t, h)
	if n := countKind(evs, workflows.EventRestartFailed); n != 3 {
		t.Fatalf("%d failed restarts, want start_retries = 3: %+v", n, evs)
	}
	if out, _ := h.Exec("grep -c attempt /data/app/attempts.log"); strings.TrimSpace(out) != "4" {
		t.Fatalf("start_cmd ran %s times, want 1 + 3 retries", strings.TrimSpace(out))
	}
	// Given up: no retry waits out a backoff, and no attempt comes while
	// supervision goes on polling.
	if en := e.entry(t, h.IP, proc.ProcessID{Namespace: "sup", Name: "svc"}); en.Managed || !en.Cancelled || !en.RetryAt.IsZero() {
		t.Fatalf("after giving up: managed %v, cancelled %v, retry at %v", en.Managed, en.Cancelled, en.RetryAt)
	}
	clock.await(t)
	if out, _ := h.Exec("grep -c attempt /data/app/attempts.log"); strings.TrimSpace(out) != "4" {
		t.Fatalf("supervision kept trying after giving up: %s starts", strings.TrimSpace(out))
	}
	hostID := workflows.HostWorkflowID(proc.HostID{IP: h.IP})
	e.recordHistory(hostID, "host-give-up")
	e.recordHistory(hostID, "host-supervised-watch-shard")
	e.recordHistory(workflows.ShardWorkflowID(e.cfg.WatchQueue(), hostID, e.cfg.WatchShards), "watch-shard")
}

func TestSuperviseEnforcesCPULimit(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	// The service burns a core once "burn" exists.
	if _, err := h.Exec(`sed -i 's/^while :; do sleep 1 \& wait \$!; done$/while :; do if [ -e \/data\/app\/burn ]; then :; else sleep 1 \& wait $!; fi; done/' /data/app/svc`); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	_, pid := e.supervised(t, h, func(s *proc.Spec) { s.CPULimit = 10 })
	if _, err := h.Exec("touch /data/app/burn"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "limit event", e.hasEvent(t, h, workflows.EventLimitExceed))
	_, _ = h.Exec("rm -f /data/app/burn")
	waitFor(t, 10*time.Second, "started again after the limit", liveNewPid(t, h, pid))
	if hostAlive(h, pid) {
		t.Fatal("the process over its limit was not stopped")
	}
	waitFor(t, 10*time.Second, "restart event after the limit", e.hasEvent(t, h, workflows.EventRestartSuccess))
	e.recordHistory(workflows.HostWorkflowID(proc.HostID{IP: h.IP}), "host-limit")
}

func TestSuperviseHealthAndDrift(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	if _, err := h.Exec("echo 'port = 1' > /data/app/app.conf"); err != nil {
		t.Fatal(err)
	}
	sum, _ := h.Exec("md5sum < /data/app/app.conf | cut -c1-32")
	e.startWorker()
	_, pid := e.supervised(t, h, func(s *proc.Spec) {
		s.HealthCmd = "./health.sh"
		s.RestartCmd = "./restart.sh"
		s.ConfigMap = []proc.ConfigFile{{Path: "/data/app/app.conf", MD5: strings.TrimSpace(sum)}}
	})
	if _, err := h.Exec("touch /data/app/sick"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "restart of an unhealthy process", liveNewPid(t, h, pid))
	_, _ = h.Exec("rm -f /data/app/sick")

	if _, err := h.Exec("echo 'port = 2' > /data/app/app.conf"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "drift event", e.hasEvent(t, h, workflows.EventConfigDrift))
	st := e.op(proc.OpStatus, proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "sup", Name: "svc"}})
	if !strings.Contains(st.Content, `"configDrift":["/data/app/app.conf"]`) {
		t.Fatalf("status must report the drifted file: %s", st.Content)
	}
	e.recordHistory(workflows.HostWorkflowID(proc.HostID{IP: h.IP}), "host-health-drift")
}

func TestSupervisionNeverUndoesAStop(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	e.startWorker()
	clock := e.pollClock(t, h.IP, h, "clock")
	it, pid := e.supervised(t, h, nil)
	// A death and an operator's stop at the same moment: the stop wins.
	if _, err := h.Exec(fmt.Sprintf("kill -9 %d", pid)); err != nil {
		t.Fatal(err)
	}
	r := e.op(proc.OpStop, it)
	if r.Code != proc.CodeSuccess && r.Code != proc.CodeNotRunning {
		t.Fatalf("stop: %+v", r)
	}
	if en := e.entry(t, h.IP, it.Process); en.Managed || !en.RetryAt.IsZero() {
		t.Fatalf("after a stop: managed %v, retry at %v", en.Managed, en.RetryAt)
	}
	clock.await(t)
	if p := hostPid(t, h, "/data/app/svc.pid"); hostAlive(h, p) {
		t.Fatalf("supervision brought back a stopped process (pid %d)", p)
	}
	chaosCount(t, "faults", 1)
	// The start and the stop, and whatever supervision ran between them.
	chaosCount(t, "ops", 2+e.supervisionAttempts(t, h.IP))
	// Operators racing each other: TestChaosRacingOperators.
}

func TestPeriodicAndOneShot(t *testing.T) {
	t.Parallel() // it mostly waits
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	if _, err := h.Exec("mkdir -p /data/job"); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	periodic := proc.Spec{ProcName: "tick", SetupPath: "/data/job", PidPath: "/data/job/tick.pid",
		StartCmd: "date +%s.%N >> /data/job/runs.log", AutoType: proc.AutoPeriodic, CycleTime: 2 * time.Second,
		StartCheck: 200 * time.Millisecond}
	it := proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "job", Name: "tick"}, Spec: &periodic}
	wantCode(t, "register periodic", e.op(proc.OpSpecRegister, it), proc.CodeSuccess)
	reg := it
	reg.Spec = nil
	wantCode(t, "manage periodic", e.op(proc.OpRegister, reg), proc.CodeSuccess)
	time.Sleep(5 * time.Second)
	// A worker restart in the middle: no run lost, none doubled.
	e.worker.Stop()
	time.Sleep(3 * time.Second)
	e.startWorker()
	time.Sleep(6 * time.Second)
	wantCode(t, "unmanage periodic", e.op(proc.OpUnregister, reg), proc.CodeSuccess)
	// Every scheduled time ran exactly once: consecutive scheduled times
	// are one cycle apart (none skipped) and none repeats (none doubled).
	var scheduled []time.Time
	for _, ev := range e.events(t, h) {
		if ev.Kind == workflows.EventPeriodicRun {
			scheduled = append(scheduled, ev.Scheduled)
		}
	}
	if len(scheduled) < 6 || len(scheduled) > 9 {
		t.Fatalf("%d runs in about 14 s at a 2 s cycle: %v", len(scheduled), scheduled)
	}
	for i := 1; i < len(scheduled); i++ {
		if d := scheduled[i].Sub(scheduled[i-1]); d != 2*time.Second {
			t.Fatalf("scheduled runs %d and %d are %s apart, want one cycle: %v", i-1, i, d, scheduled)
		}
	}
	out, _ := h.Exec("grep -c . /data/job/runs.log")
	if n, _ := strconv.Atoi(strings.TrimSpace(out)); n != len(scheduled) {
		t.Fatalf("start_cmd ran %d times for %d scheduled runs", n, len(scheduled))
	}

	oneShot := proc.Spec{ProcName: "once", SetupPath: "/data/job", PidPath: "/data/job/once.pid",
		StartCmd: "echo ran >> /data/job/once.log", AutoType: proc.AutoOneShot, StartCheck: 200 * time.Millisecond}
	one := proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "job", Name: "once"}, Spec: &oneShot}
	clock := e.pollClock(t, h.IP, h, "clock")
	wantCode(t, "one-shot start", e.op(proc.OpStart, one), proc.CodeSuccess)
	clock.await(t)
	if out, _ := h.Exec("grep -c ran /data/job/once.log"); strings.TrimSpace(out) != "1" {
		t.Fatalf("a one-shot ran %s times", strings.TrimSpace(out))
	}
	e.recordHistory(workflows.HostWorkflowID(proc.HostID{IP: h.IP}), "host-periodic-one-shot")
}

func TestSupervisionSurvivesWorkerAndServerRestarts(t *testing.T) {
	db := filepath.Join(t.TempDir(), "temporal.db")
	own := testbed.NewTemporal(t, testbed.TemporalOptions{DBFile: db})
	e := newEnv(t, 1)
	e.cfg.TemporalAddress = own.Address
	e.client = e.dial(t)
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	e.startWorker()
	_, pid := e.supervised(t, h, nil)

	// The worker goes away; the process dies meanwhile; a new worker repairs it.
	e.worker.Stop()
	if _, err := h.Exec(fmt.Sprintf("kill -9 %d", pid)); err != nil {
		t.Fatal(err)
	}
	e.startWorker()
	// A stopping worker hands its watch back at once; a watch it was
	// handed as it stopped is dropped unanswered, and taken up again
	// after its heartbeat timeout.
	waitFor(t, policies.WatchHeartbeatTimeout+30*time.Second, "restart after a worker restart", liveNewPid(t, h, pid))
	pid = hostPid(t, h, "/data/app/svc.pid")

	// The server restarts on the same db file; supervision goes on.
	if err := own.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Exec(fmt.Sprintf("kill -9 %d", pid)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "restart after a server restart", liveNewPid(t, h, pid))
	// A restart's event follows its start check; the count waits for both.
	waitFor(t, 10*time.Second, "both restarts recorded", func() bool {
		return countKind(e.events(t, h), workflows.EventRestartSuccess) >= 2
	})
	chaosCount(t, "faults", 4)                             // a worker stop, a server restart, two kill -9
	chaosCount(t, "ops", 1+e.supervisionAttempts(t, h.IP)) // the start and supervision's restarts
	if os.Getenv("DROVER_KEEP") == "" {
		e.worker.Stop()
	}
}

// scrape reads a Prometheus text page into series → value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if line == "" || line[0] == '#' || i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// sumSeries adds the series of one metric whose labels include each of labels.
func sumSeries(m map[string]float64, prefix string, labels ...string) float64 {
	var sum float64
next:
	for k, v := range m {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(k, l) {
				continue next
			}
		}
		sum += v
	}
	return sum
}
