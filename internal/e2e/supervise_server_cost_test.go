//go:build scale

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestSupervisionServerCost counts what quiet supervision costs the
// Temporal server, on the dev server's own /metrics: the frontend's
// service_requests by operation, over a quiet window of three per-host
// watch heartbeat intervals, for DROVER_COST_HOSTS hosts (default 20) x
// DROVER_COST_PROCS managed processes (default 2) at a 10 s interval,
// watched by DROVER_COST_SHARDS shards (default one per
// policies.HostsPerShard hosts; 0 is a watch per host). It reports the
// requests per second per 1,000 hosts, with the worker's long polls (a
// fixed cost per worker, whatever its hosts) apart, and checks that the
// quiet window added no history and polled each host once a poll. Run
// with `make test-scale`.
func TestSupervisionServerCost(t *testing.T) {
	hosts, procs := 20, 2
	if n, err := strconv.Atoi(os.Getenv("DROVER_COST_HOSTS")); err == nil && n > 0 {
		hosts = n
	}
	if n, err := strconv.Atoi(os.Getenv("DROVER_COST_PROCS")); err == nil && n > 0 {
		procs = n
	}
	shards := (hosts + policies.HostsPerShard - 1) / policies.HostsPerShard
	if n, err := strconv.Atoi(os.Getenv("DROVER_COST_SHARDS")); err == nil && n >= 0 {
		shards = n
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsPort := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	own := testbed.NewTemporal(t, testbed.TemporalOptions{SearchAttributes: workflows.SearchAttributeTypes, MetricsPort: metricsPort})
	metrics := "127.0.0.1:" + strconv.Itoa(metricsPort)

	e := newEnv(t, hosts)
	e.cfg.TemporalAddress = own.Address
	e.cfg.SuperviseInterval = 10 * time.Second
	e.cfg.WatchShards = shards
	e.client = e.dial(t)
	var items []proc.Item
	for _, h := range e.bed.Hosts {
		for p := 0; p < procs; p++ {
			dir := fmt.Sprintf("app%d", p)
			installApp(t, h, dir)
			spec := appSpec(dir)
			spec.ValueKey = dir
			items = append(items, proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: "cost", Name: dir}, Spec: &spec})
		}
	}
	e.startWorker()
	// Thousands of starts on two cores take longer than runOperate waits.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	in := workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStart, Items: items}
	if err := engine.StartOperate(ctx, e.client, e.cfg.TaskQueue, in); err != nil {
		t.Fatal(err)
	}
	res, err := engine.WaitOperateAll(ctx, e.client, in.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Results {
		if r.Code != proc.CodeSuccess {
			t.Fatalf("start %s: %+v", r.Key, r.HostResult)
		}
	}
	// Quiet means every watch is polling and has sent its first
	// heartbeats: two polls per host, then one heartbeat interval.
	started := e.worker.SSH.Stats().Execs
	waitFor(t, 10*time.Minute, "every host's watch polling", func() bool {
		return e.worker.SSH.Stats().Execs >= started+2*int64(hosts)
	})
	time.Sleep(policies.WatchHeartbeatTimeout)

	histories := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		n := 0
		for _, h := range e.bed.Hosts {
			n += e.historyLength(ctx, workflows.HostWorkflowID(proc.HostID{IP: h.IP}))
		}
		for i := range shards {
			n += e.historyLength(ctx, workflows.ShardID(e.cfg.WatchQueue(), i))
		}
		return n
	}
	events0 := histories()
	// The server's counters lag its requests a little: the history reads
	// just made must not land in the window.
	time.Sleep(10 * time.Second)
	before := frontendRequests(t, metrics)
	execs0 := e.worker.SSH.Stats().Execs
	began := time.Now()
	time.Sleep(3 * policies.WatchHeartbeatTimeout)
	execs := e.worker.SSH.Stats().Execs - execs0
	secs := time.Since(began).Seconds()
	after := frontendRequests(t, metrics)
	grown := histories() - events0

	// The dev server's own workers poll in its temporal_system namespace:
	// they are listed, never counted as drover's.
	var ops []string
	for op := range after {
		if after[op] > before[op] {
			ops = append(ops, op)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return after[ops[i]]-before[ops[i]] > after[ops[j]]-before[ops[j]] })
	var perHost, polls float64
	var lines []string
	for _, op := range ops {
		rate := (after[op] - before[op]) / secs
		switch {
		case !strings.HasPrefix(op, e.cfg.TemporalNamespace+" "):
		case strings.Contains(op, " Poll"):
			polls += rate
		default:
			perHost += rate
		}
		lines = append(lines, fmt.Sprintf("  %-52s %7.3f/s  %8.2f/s per 1,000 hosts", op, rate, rate*1000/float64(hosts)))
	}
	perPoll := float64(execs) / (float64(hosts) * secs / e.cfg.SuperviseInterval.Seconds())
	t.Logf("%d hosts x %d processes, %d shards, %s interval, %.0fs quiet; frontend requests by operation:\n%s", hosts, procs, shards,
		e.cfg.SuperviseInterval, secs, strings.Join(lines, "\n"))
	t.Logf("in %s, per-host operations: %.3f/s = %.2f/s per 1,000 hosts; long polls (the worker's, and the server's own worker of the namespace): %.3f/s, not per host; all: %.2f/s per 1,000 hosts",
		e.cfg.TemporalNamespace,
		perHost, perHost*1000/float64(hosts), polls, (perHost+polls)*1000/float64(hosts))
	t.Logf("SSH execs per host per poll: %.2f; history events added while quiet: %d", perPoll, grown)
	if grown != 0 {
		t.Errorf("quiet supervision added %d history events", grown)
	}
	if perPoll > 1.1 {
		t.Errorf("%.2f SSH execs per host per poll, want 1", perPoll)
	}
}

var serviceRequest = regexp.MustCompile(`^service_requests\{(.*)\}$`)
var opLabel = regexp.MustCompile(`operation="([^"]*)"`)
var nsLabel = regexp.MustCompile(`namespace="([^"]*)"`)

// frontendRequests reads the dev server's service_requests counters of
// its frontend, by "<namespace> <operation>".
func frontendRequests(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for k, v := range scrape(t, addr) {
		m := serviceRequest.FindStringSubmatch(k)
		if m == nil || !strings.Contains(m[1], `service_name="frontend"`) {
			continue
		}
		op, ns := opLabel.FindStringSubmatch(m[1]), nsLabel.FindStringSubmatch(m[1])
		if op != nil && ns != nil {
			out[ns[1]+" "+op[1]] += v
		}
	}
	return out
}
