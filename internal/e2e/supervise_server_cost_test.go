//go:build scale

package e2e

import (
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
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestSupervisionServerCost counts what quiet supervision costs the
// Temporal server, on the dev server's own /metrics: the frontend's
// service_requests by operation, over a quiet window of three watch
// heartbeat intervals, for DROVER_COST_HOSTS hosts (default 20) x 2
// managed processes at a 10 s interval. It reports the requests per
// second per 1,000 hosts, with the worker's long polls (a fixed cost per
// worker, whatever its hosts) apart. Run with `make test-scale`.
func TestSupervisionServerCost(t *testing.T) {
	hosts, procs := 20, 2
	if n, err := strconv.Atoi(os.Getenv("DROVER_COST_HOSTS")); err == nil && n > 0 {
		hosts = n
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
	res := e.runOperate(workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStart, Items: items})
	for _, r := range res.Results {
		if r.Code != proc.CodeSuccess {
			t.Fatalf("start %s: %+v", r.Key, r.HostResult)
		}
	}
	// Quiet means every watch is polling and has sent its first
	// heartbeats: two polls per host, then one heartbeat interval.
	started := e.worker.SSH.Stats().Execs
	waitFor(t, 2*time.Minute, "every host's watch polling", func() bool {
		return e.worker.SSH.Stats().Execs >= started+2*int64(hosts)
	})
	time.Sleep(policies.WatchHeartbeatTimeout)

	before := frontendRequests(t, metrics)
	began := time.Now()
	time.Sleep(3 * policies.WatchHeartbeatTimeout)
	after := frontendRequests(t, metrics)
	secs := time.Since(began).Seconds()

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
		if strings.HasPrefix(op, "Poll") {
			polls += rate
		} else {
			perHost += rate
		}
		lines = append(lines, fmt.Sprintf("  %-36s %7.3f/s  %8.1f/s per 1,000 hosts", op, rate, rate*1000/float64(hosts)))
	}
	t.Logf("%d hosts x %d processes, %s interval, %s quiet; frontend requests by operation:\n%s", hosts, procs,
		e.cfg.SuperviseInterval, time.Since(began).Round(time.Second), strings.Join(lines, "\n"))
	t.Logf("per-host operations: %.3f/s = %.1f/s per 1,000 hosts; the worker's long polls: %.3f/s (per worker, not per host)",
		perHost, perHost*1000/float64(hosts), polls)
}

var serviceRequest = regexp.MustCompile(`^service_requests\{(.*)\}$`)
var opLabel = regexp.MustCompile(`operation="([^"]*)"`)

// frontendRequests reads the dev server's service_requests counters of
// its frontend, by operation.
func frontendRequests(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for k, v := range scrape(t, addr) {
		m := serviceRequest.FindStringSubmatch(k)
		if m == nil || !strings.Contains(m[1], `service_name="frontend"`) {
			continue
		}
		if op := opLabel.FindStringSubmatch(m[1]); op != nil {
			out[op[1]] += v
		}
	}
	return out
}
