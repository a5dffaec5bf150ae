package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// chaosFull reports whether the fault tests run at full size (`make chaos`
// sets DROVER_CHAOS=full); `make test` runs them reduced.
func chaosFull() bool { return os.Getenv("DROVER_CHAOS") == "full" }

// chaosScale picks the reduced or the full size.
func chaosScale(reduced, full int) int {
	if chaosFull() {
		return full
	}
	return reduced
}

// chaosCount adds n to one of the counters `make chaos` sums into its
// summary, by appending "name n test" to $DROVER_CHAOS_SUMMARY. Tests count
// what they actually did or saw, zeros included, so the summary shows a
// measured 0 rather than an absent one.
func chaosCount(t *testing.T, name string, n int) {
	path := os.Getenv("DROVER_CHAOS_SUMMARY")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("chaos summary: %v", err)
	}
	defer f.Close()
	// One short write per line: O_APPEND keeps lines from parallel test
	// processes whole.
	if _, err := fmt.Fprintf(f, "%s %d %s\n", name, n, t.Name()); err != nil {
		t.Fatalf("chaos summary: %v", err)
	}
}

// supervisionAttempts counts the starts supervision itself made (its
// restart events, succeeded or failed) on the host workflows of ips: the
// ops it really ran, for the summary, rather than the ones a test expects.
func (e *env) supervisionAttempts(t *testing.T, ips ...string) int {
	t.Helper()
	n := 0
	for _, ip := range ips {
		evs := e.hostEvents(t, proc.HostID{IP: ip})
		n += countKind(evs, workflows.EventRestartSuccess) + countKind(evs, workflows.EventRestartFailed)
	}
	return n
}

// ident is one inventory identity of a fault test: its own GSE ip, the sshd
// host it lives on, and its own copy of the app under /data/<dir>, so
// identities sharing an sshd host keep their pid files and start logs apart.
type ident struct {
	ip   string
	host *testbed.Host
	dir  string
}

func (id ident) item() proc.Item {
	return proc.Item{Target: proc.Target{IP: id.ip}, Process: proc.ProcessID{Namespace: "chaos", Name: "svc"}}
}

func (id ident) pidPath() string { return "/data/" + id.dir + "/svc.pid" }

// starts counts the lines start_cmd appended to the identity's start log.
func (id ident) starts(t *testing.T) int {
	t.Helper()
	out, _ := id.host.Exec("grep -c start /data/" + id.dir + "/starts.log 2>/dev/null || true")
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n
}

func (id ident) alive(t *testing.T) bool {
	t.Helper()
	p := hostPid(t, id.host, id.pidPath())
	return p != 0 && hostAlive(id.host, p)
}

// fleetNets numbers the fleets of a test run.
var fleetNets atomic.Int32

// fleet spreads n identities over the bed's sshd hosts (round robin, through
// the inventory's address), installs the app for each with a start that
// sleeps startSleep, and writes the inventory. The worker is not started.
func (e *env) fleet(t *testing.T, n int, startSleep string) []ident {
	t.Helper()
	// A network of the test's own: tests run side by side on one server,
	// and identities name host workflows.
	net := 100 + int(fleetNets.Add(1))%150
	ids := make([]ident, n)
	var inv []map[string]any
	for i := range ids {
		h := e.bed.Hosts[i%len(e.bed.Hosts)]
		ids[i] = ident{ip: fmt.Sprintf("10.%d.%d.%d", net, i/250, i%250+1), host: h, dir: fmt.Sprintf("app%d", i)}
		installApp(t, h, ids[i].dir)
		if _, err := h.Exec(fmt.Sprintf(`sed -i 's/^sleep 0.2$/sleep %s/' /data/%s/start.sh`, startSleep, ids[i].dir)); err != nil {
			t.Fatal(err)
		}
		inv = append(inv, map[string]any{"ip": ids[i].ip, "bk_cloud_id": 0, "bk_supplier_id": 0, "address": h.IP})
	}
	e.writeInventory(inv, nil)
	return ids
}

// registerFleet registers each identity's own spec through a worker of
// this process, which it stops again.
func (e *env) registerFleet(t *testing.T, ids []ident, edit func(*proc.Spec)) {
	t.Helper()
	e.startWorker()
	items := make([]proc.Item, len(ids))
	for i, id := range ids {
		spec := appSpec(id.dir)
		if edit != nil {
			edit(&spec)
		}
		items[i] = id.item()
		items[i].Spec = &spec
	}
	res := e.runOperate(workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpSpecRegister, Items: items})
	for _, r := range res.Results {
		if r.Code != proc.CodeSuccess {
			t.Fatalf("register %s: %+v", r.Key, r.HostResult)
		}
	}
	chaosCount(t, "ops", 1)
}

// startOp starts op on every identity and returns its task id.
func (e *env) startOp(t *testing.T, op proc.OpType, ids []ident) string {
	t.Helper()
	task, err := e.tryStartOp(op, ids)
	if err != nil {
		t.Fatal(err)
	}
	chaosCount(t, "ops", 1)
	return task
}

// tryStartOp is startOp for a goroutine other than the test's, which must
// not end the test: it reports the error and counts nothing.
func (e *env) tryStartOp(op proc.OpType, ids []ident) (string, error) {
	items := make([]proc.Item, len(ids))
	for i, id := range ids {
		items[i] = id.item()
	}
	in := workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: op, Items: items}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := engine.StartOperate(ctx, e.client, e.cfg.TaskQueue, in); err != nil {
		return "", fmt.Errorf("start %v: %w", op, err)
	}
	return in.TaskID, nil
}

// waitOp waits for a task and returns its results by identity ip.
func (e *env) waitOp(t *testing.T, taskID string, limit time.Duration) map[string]proc.HostResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	res, err := engine.WaitOperateAll(ctx, e.client, taskID)
	if err != nil {
		t.Fatalf("task %s: %v", taskID, err)
	}
	out := map[string]proc.HostResult{}
	for _, r := range res.Results {
		tg, _, err := proc.ParseResultKey(r.Key)
		if err != nil {
			t.Fatal(err)
		}
		out[tg.IP] = r.HostResult
	}
	return out
}

// waitStarted waits until at least min identities' start_cmd has begun.
func waitStarted(t *testing.T, ids []ident, min int) {
	t.Helper()
	waitFor(t, 2*time.Minute, fmt.Sprintf("%d start commands under way", min), func() bool {
		n := 0
		for _, id := range ids {
			if id.starts(t) > 0 {
				n++
			}
		}
		return n >= min
	})
}

// checkStartedOnce checks every identity answered 0, runs, and ran
// start_cmd exactly want times; it counts the ops lost and the double
// starts for the summary.
func checkStartedOnce(t *testing.T, ids []ident, res map[string]proc.HostResult, want int) {
	t.Helper()
	lost, doubled := 0, 0
	for _, id := range ids {
		r, ok := res[id.ip]
		if res != nil && (!ok || r.Code != proc.CodeSuccess) {
			lost++
			t.Errorf("%s: %+v (answered %v)", id.ip, r, ok)
		}
		if !id.alive(t) {
			lost++
			t.Errorf("%s: not running", id.ip)
		}
		if n := id.starts(t); n != want {
			if n > want {
				doubled++
			}
			t.Errorf("%s: start_cmd ran %d times, want %d", id.ip, n, want)
		}
	}
	chaosCount(t, "lost", lost)
	chaosCount(t, "double_starts", doubled)
}

// TestChaosWorkerKilledMidFanOut SIGKILLs the worker process while a start
// on every identity is under way, and starts another: the op completes and
// start_cmd ran exactly once per identity. Reduced: 12 identities sharing 3
// sshd hosts; full: 100 identities on 100 sshd hosts.
func TestChaosWorkerKilledMidFanOut(t *testing.T) {
	t.Parallel() // it mostly waits
	n, sshd := chaosScale(12, 100), chaosScale(3, 100)
	e := newEnv(t, sshd)
	ids := e.fleet(t, n, "3")
	e.registerFleet(t, ids, func(s *proc.Spec) { s.StartCheck = 2 * time.Second; s.OpTimeout = time.Minute })
	e.worker.Stop()

	first := e.startWorkerProcess(t)
	task := e.startOp(t, proc.OpStart, ids)
	waitStarted(t, ids, (n+1)/2)
	if err := syscall.Kill(-first.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = first.Process.Wait()
	chaosCount(t, "faults", 1)
	e.startWorkerProcess(t)
	checkStartedOnce(t, ids, e.waitOp(t, task, 5*time.Minute), 1)
}

// TestChaosServerRestarts restarts the dev server on its db file while a
// start is under way on every identity, then again while supervision is
// bringing back processes killed with -9: the op completes, every process
// is back, and start_cmd ran once per start and once per restart.
func TestChaosServerRestarts(t *testing.T) {
	t.Parallel() // it mostly waits
	n, sshd := chaosScale(4, 20), chaosScale(2, 10)
	own := testbed.NewTemporal(t, testbed.TemporalOptions{DBFile: filepath.Join(t.TempDir(), "temporal.db")})
	e := newEnv(t, sshd)
	e.cfg.TemporalAddress = own.Address
	e.client = e.dial(t)
	ids := e.fleet(t, n, "3")
	// Each identity's health_cmd logs its polls: the progress marker that
	// supervision has moved on once every process is back.
	clocks := make([]pollClock, n)
	for i, id := range ids {
		clocks[i] = pollClock{h: id.host, log: "/data/" + id.dir + "/polls.log"}
	}
	e.registerFleet(t, ids, func(s *proc.Spec) {
		s.StartCheck, s.OpTimeout = 2*time.Second, time.Minute
		s.StartRetries, s.StartInterval = 2, time.Second
		s.HealthCmd = "echo poll >> polls.log"
	})

	task := e.startOp(t, proc.OpStart, ids)
	waitStarted(t, ids, (n+1)/2)
	restart := func() {
		t.Helper()
		if err := own.Stop(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := own.Start(); err != nil {
			t.Fatal(err)
		}
		chaosCount(t, "faults", 1)
	}
	restart()
	checkStartedOnce(t, ids, e.waitOp(t, task, 3*time.Minute), 1)

	// Mid-supervision: every process dies, and the server goes down while
	// the host workflows notice and restart them.
	pids := make([]int, n)
	killed := 0
	for i, id := range ids {
		pids[i] = hostPid(t, id.host, id.pidPath())
		if _, err := id.host.Exec(fmt.Sprintf("kill -9 %d", pids[i])); err != nil {
			t.Fatal(err)
		}
		killed++
	}
	chaosCount(t, "faults", killed)
	t.Cleanup(func() {
		if t.Failed() {
			for _, id := range ids {
				e.dumpStuckHosts(t, []proc.Item{id.item()})
			}
			for n := range e.cfg.WatchShards {
				e.dumpWorkflow(t, workflows.ShardID(e.cfg.WatchQueue(), n))
			}
		}
	})
	time.Sleep(500 * time.Millisecond)
	restart()
	for i, id := range ids {
		waitFor(t, 2*time.Minute, id.ip+" restarted by supervision", func() bool {
			p := hostPid(t, id.host, id.pidPath())
			return p != pids[i] && id.alive(t)
		})
		waitFor(t, 30*time.Second, id.ip+" restart recorded", func() bool {
			return countKind(e.hostEvents(t, proc.HostID{IP: id.ip}), workflows.EventRestartSuccess) > 0
		})
	}
	// Every host workflow polls twice more, so a doubled restart, which
	// would hold its host's supervision, has run by then.
	awaitPolls(t, clocks)
	checkStartedOnce(t, ids, nil, 2)
	ips := make([]string, n)
	for i, id := range ids {
		ips[i] = id.ip
	}
	chaosCount(t, "ops", e.supervisionAttempts(t, ips...))
}

// TestChaosSSHDKilledMidOp kills one host's sshd, and everything on it,
// while a start runs on every host: that host ends 117 within its
// op_timeout, and the others succeed.
func TestChaosSSHDKilledMidOp(t *testing.T) {
	n := chaosScale(4, 20)
	e := newEnv(t, n)
	ids := e.fleet(t, n, "3")
	const opTimeout = 20 * time.Second
	e.registerFleet(t, ids, func(s *proc.Spec) { s.StartCheck = 2 * time.Second; s.OpTimeout = opTimeout })
	victim := ids[0]

	task := e.startOp(t, proc.OpStart, ids)
	waitStarted(t, ids[:1], 1)
	if err := victim.host.Stop(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	chaosCount(t, "faults", 1)
	res := e.waitOp(t, task, 2*time.Minute)
	took := time.Since(killed)
	// Stopping the host kills its sshd and the command together: when the
	// command dies first, its session still reports the KILL before the
	// connection drops, and the start answers that its command did not
	// finish; when the session dies first, the host is unreachable.
	// Either way the host fails alone, with its own code and the cause
	// (the shell's "Killed", or exit 137 where the command and its check
	// share one exec and the shell itself was killed).
	r := res[victim.ip]
	killedFirst := r.Code == proc.CodeCommandFailed && strings.Contains(r.Message, "did not finish") &&
		(strings.Contains(r.Message, "Killed") || strings.Contains(r.Message, "exit 137"))
	if r.Code != proc.CodeUnreachable && !killedFirst || r.Message == "" {
		t.Errorf("host whose sshd died mid-op: %d (%s), want %d, or %d for a command killed before its session", r.Code, r.Message, proc.CodeUnreachable, proc.CodeCommandFailed)
	}
	if took > opTimeout {
		t.Errorf("the op ended %s after the kill, past op_timeout %s", took, opTimeout)
	}
	delete(res, victim.ip)
	checkStartedOnce(t, ids[1:], res, 1)
}

// TestChaosHungSSHD freezes one host's sshd (SIGSTOP on the listener and
// its sessions) under supervision: an op over every host answers the hung
// one with its own code while the others finish without waiting for it;
// after SIGCONT, supervision repairs a process that died meanwhile.
func TestChaosHungSSHD(t *testing.T) {
	t.Parallel() // it mostly waits
	n := chaosScale(3, 10)
	e := newEnv(t, n)
	ids := e.fleet(t, n, "0.2")
	const opTimeout = 10 * time.Second
	e.registerFleet(t, ids, func(s *proc.Spec) {
		s.OpTimeout, s.StartRetries, s.StartInterval = opTimeout, 2, time.Second
	})
	checkStartedOnce(t, ids, e.waitOp(t, e.startOp(t, proc.OpStart, ids), time.Minute), 1)
	victim := ids[0]
	if err := victim.host.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.host.Resume() })
	chaosCount(t, "faults", 1)
	// The process dies while its host hangs; supervision cannot act yet.
	pid := hostPid(t, victim.host, victim.pidPath())
	if _, err := victim.host.Exec(fmt.Sprintf("kill -9 %d", pid)); err != nil {
		t.Fatal(err)
	}
	chaosCount(t, "faults", 1)

	// Status probes hosts in batches: the batch answers when its hung host
	// times out, within that host's op_timeout, with the others' answers.
	began := time.Now()
	res := e.waitOp(t, e.startOp(t, proc.OpStatus, ids), 2*opTimeout+time.Minute)
	took := time.Since(began)
	r := res[victim.ip]
	if r.Code != proc.CodeUnreachable && r.Code != proc.CodeTimeout || r.Message == "" {
		t.Errorf("hung host: %d (%s), want %d or %d with a message", r.Code, r.Message, proc.CodeUnreachable, proc.CodeTimeout)
	}
	for _, id := range ids[1:] {
		if res[id.ip].Code != proc.CodeSuccess {
			t.Errorf("status of %s: %+v", id.ip, res[id.ip])
		}
	}
	if took > opTimeout+15*time.Second {
		t.Errorf("status over a hung host took %s; its op_timeout is %s", took, opTimeout)
	}
	t.Logf("status over %d hosts, one hung: %s (hung host %d %q)", n, took.Round(time.Millisecond), r.Code, r.Message)

	// A control op runs per host: the others finish while the hung one
	// is still pending, then it fails alone.
	task := e.startOp(t, proc.OpRestart, ids)
	othersFirst := false
	waitFor(t, 2*opTimeout+time.Minute, "restart over a hung host", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p, err := engine.FetchOperate(ctx, e.client, task)
		if err != nil {
			return false
		}
		res = map[string]proc.HostResult{}
		for _, kr := range p.Results {
			tg, _, _ := proc.ParseResultKey(kr.Key)
			res[tg.IP] = kr.HostResult
		}
		others := true
		for _, id := range ids[1:] {
			others = others && res[id.ip].Code == proc.CodeSuccess
		}
		if others && res[victim.ip].Code == proc.CodeRunning {
			othersFirst = true
		}
		return p.Done == p.Total && p.Total == n
	})
	if r := res[victim.ip]; r.Code != proc.CodeUnreachable && r.Code != proc.CodeTimeout || r.Message == "" {
		t.Errorf("restart on the hung host: %d (%s), want %d or %d with a message", r.Code, r.Message, proc.CodeUnreachable, proc.CodeTimeout)
	}
	for _, id := range ids[1:] {
		if res[id.ip].Code != proc.CodeSuccess {
			t.Errorf("restart of %s: %+v", id.ip, res[id.ip])
		}
	}
	if !othersFirst {
		t.Error("the other hosts' restarts waited for the hung host")
	}

	if err := victim.host.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "supervision restarts the process after SIGCONT", func() bool {
		p := hostPid(t, victim.host, victim.pidPath())
		return p != pid && victim.alive(t)
	})
	waitFor(t, 10*time.Second, "the restart recorded", func() bool {
		return countKind(e.hostEvents(t, proc.HostID{IP: victim.ip}), workflows.EventRestartSuccess) > 0
	})
	chaosCount(t, "ops", e.supervisionAttempts(t, victim.ip))
	res = e.waitOp(t, e.startOp(t, proc.OpStatus, ids), time.Minute)
	for _, id := range ids {
		if res[id.ip].Code != proc.CodeSuccess {
			t.Errorf("%s after SIGCONT: %+v", id.ip, res[id.ip])
		}
	}
	// The hung host: its start and supervision's; the others: their
	// start and the restart.
	checkStartedOnce(t, ids, nil, 2)
}

// accepted counts the sessions sshd accepted, from its log.
func accepted(t *testing.T, h *testbed.Host) int {
	t.Helper()
	b, err := os.ReadFile(h.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "Accepted publickey")
}

// TestChaosDroppedConnections kills every sshd connection process under
// the worker's connection pool: the next op reconnects and succeeds on
// every host, with no failure surfacing.
func TestChaosDroppedConnections(t *testing.T) {
	n := chaosScale(3, 10)
	e := newEnv(t, n)
	ids := e.fleet(t, n, "0.2")
	e.registerFleet(t, ids, nil)
	checkStartedOnce(t, ids, e.waitOp(t, e.startOp(t, proc.OpStart, ids), time.Minute), 1)
	for round := 0; round < chaosScale(2, 5); round++ {
		before := map[*testbed.Host]int{}
		for _, h := range e.bed.Hosts {
			k, err := h.DropConnections()
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				t.Fatalf("%s: no pooled connection to drop", h.IP)
			}
			before[h] = accepted(t, h)
			chaosCount(t, "faults", 1)
		}
		res := e.waitOp(t, e.startOp(t, proc.OpStatus, ids), time.Minute)
		for _, id := range ids {
			if r := res[id.ip]; r.Code != proc.CodeSuccess {
				t.Errorf("round %d, %s after its connection dropped: %d (%s)", round, id.ip, r.Code, r.Message)
			}
		}
		for h, b := range before {
			if accepted(t, h) <= b {
				t.Errorf("round %d: %s was not dialled again", round, h.IP)
			}
		}
	}
}

// signalOrder lists the op requests a host workflow received, in the order
// it accepted them: ops on a host run one at a time in that order.
func (e *env) signalOrder(t *testing.T, host string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := e.client.GetWorkflowHistory(ctx, workflows.HostWorkflowID(proc.HostID{IP: host}), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var ids []string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		// A task hands its items over by update; tasks begun before
		// updates, by signal.
		var input *commonpb.Payloads
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.SignalName == workflows.OpSignal {
			input = a.Input
		} else if u := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); u != nil && u.GetAcceptedRequest().GetInput().GetName() == workflows.OpUpdate {
			input = u.GetAcceptedRequest().GetInput().GetArgs()
		} else {
			continue
		}
		var req workflows.HostRequest
		if err := converter.GetDefaultDataConverter().FromPayloads(input, &req); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, req.RequestID)
	}
	return ids
}

// instances counts the running instances of the app on h: processes in
// the host's own mount namespace (the pid namespace is the machine's, with
// other tests' apps in it) running ./svc whose parent does not (an
// instance's own fork, before it execs sleep, carries the same command line
// for a moment).
func instances(t *testing.T, h *testbed.Host) int {
	t.Helper()
	out, err := h.Exec(`pids=" "; me=$(readlink /proc/self/ns/mnt)
for p in /proc/[0-9]*; do
  [ "$(readlink $p/ns/mnt 2>/dev/null)" = "$me" ] || continue
  tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^/bin/sh ./svc' && pids="$pids${p#/proc/} "
done
n=0
for p in $pids; do
  s=$(cat /proc/$p/stat 2>/dev/null) || continue
  set -- ${s##*) }
  case "$pids" in *" $2 "*) ;; *) n=$((n+1)) ;; esac
done
echo $n`)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n
}

// TestChaosRacingOperators has two operators send a restart and a stop for
// the same process at the same moment, round after round: the end state is
// what the op the host accepted last says, and supervision never brings
// back a process whose last op was a stop.
func TestChaosRacingOperators(t *testing.T) {
	e := newEnv(t, 1)
	ids := e.fleet(t, 1, "0.2")
	id := ids[0]
	e.registerFleet(t, ids, func(s *proc.Spec) { s.StartRetries, s.StartInterval = 2, time.Second })
	checkStartedOnce(t, ids, e.waitOp(t, e.startOp(t, proc.OpStart, ids), time.Minute), 1)
	clock := e.pollClock(t, id.ip, id.host, "clock")
	for round := 0; round < chaosScale(3, 10); round++ {
		// The operators run on goroutines of their own, which may not end
		// the test: they hand back their task or error, reported here.
		var wg sync.WaitGroup
		tasks := map[proc.OpType]string{}
		var errs []error
		var mu sync.Mutex
		for i, op := range []proc.OpType{proc.OpRestart, proc.OpStop} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Alternate which operator is a hair late, so both
				// orders of acceptance occur.
				if i == round%2 {
					time.Sleep(20 * time.Millisecond)
				}
				task, err := e.tryStartOp(op, ids)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				tasks[op] = task
			}()
		}
		wg.Wait()
		chaosCount(t, "ops", len(tasks))
		if len(errs) > 0 {
			t.Fatalf("round %d: %v", round, errs)
		}
		chaosCount(t, "faults", 1)
		results := map[proc.OpType]proc.HostResult{}
		for op, task := range tasks {
			results[op] = e.waitOp(t, task, time.Minute)[id.ip]
		}
		order := e.signalOrder(t, id.ip)
		last := proc.OpType(-1)
		for _, rid := range order {
			for op, task := range tasks {
				if strings.HasPrefix(rid, task+"#") {
					last = op
				}
			}
		}
		// Two more polls of the host, so supervision has acted on
		// whatever it saw: it would undo a stop by now if it would.
		clock.await(t)
		alive := id.alive(t)
		entries := []workflows.Entry{e.entry(t, id.ip, id.item().Process)}
		t.Logf("round %d: restart %d, stop %d, last accepted %v; alive %v, managed %v", round,
			results[proc.OpRestart].Code, results[proc.OpStop].Code, last, alive, entries[0].Managed)
		switch {
		case last == proc.OpStop && (alive || entries[0].Managed):
			t.Fatalf("round %d: the stop was accepted last, yet the process runs (%v) or is managed (%v)", round, alive, entries[0].Managed)
		case last == proc.OpRestart && results[proc.OpRestart].Code == proc.CodeSuccess && (!alive || !entries[0].Managed):
			t.Fatalf("round %d: the restart was accepted last and succeeded, yet the process runs %v, managed %v", round, alive, entries[0].Managed)
		case last == proc.OpType(-1):
			t.Fatalf("round %d: the host accepted neither op: %v", round, order)
		}
		k := instances(t, id.host)
		chaosCount(t, "double_starts", max(k-1, 0))
		if k > 1 {
			ps, _ := id.host.Exec(`me=$(readlink /proc/self/ns/mnt); for p in /proc/[0-9]*; do [ "$(readlink $p/ns/mnt 2>/dev/null)" = "$me" ] && echo "$(cut -d' ' -f1-4 $p/stat 2>/dev/null) $(tr '\0' ' ' < $p/cmdline 2>/dev/null)"; done`)
			t.Fatalf("round %d: %d instances run at once:\n%s", round, k, ps)
		}
	}
}
