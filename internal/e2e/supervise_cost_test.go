//go:build scale

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestSupervisionCost supervises 50 hosts x 5 managed processes at a 2 s
// interval and counts, over a quiet minute, the SSH execs per host per poll
// (want 1) and the history events each host workflow gained (want 0).
// Run with `make test-scale` (DROVER_COST_HOSTS changes the host count).
func TestSupervisionCost(t *testing.T) {
	hosts, procs := 50, 5
	if n, err := strconv.Atoi(os.Getenv("DROVER_COST_HOSTS")); err == nil && n > 0 {
		hosts = n
	}
	const interval = 2 * time.Second
	e := newEnv(t, hosts)
	e.cfg.SuperviseInterval = interval
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
	// Every host's watch is running once the worker has sent two polls'
	// worth of execs (one per host per poll) since the start: waiting for
	// time instead would measure a half-started fleet on a slow machine.
	started := e.worker.SSH.Stats().Execs
	waitFor(t, 2*time.Minute, "every host's watch polling", func() bool {
		return e.worker.SSH.Stats().Execs >= started+2*int64(hosts)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lengths := func() []int {
		out := make([]int, hosts, hosts+e.cfg.WatchShards)
		for i, h := range e.bed.Hosts {
			out[i] = e.historyLength(ctx, workflows.HostWorkflowID(proc.HostID{IP: h.IP}))
		}
		// The shards' histories count too: a quiet shard adds none.
		for n := range e.cfg.WatchShards {
			out = append(out, e.historyLength(ctx, workflows.ShardID(e.cfg.WatchQueue(), n)))
		}
		return out
	}
	before := lengths()
	execs0 := e.worker.SSH.Stats().Execs
	began := time.Now()
	time.Sleep(time.Minute)
	execs := e.worker.SSH.Stats().Execs - execs0
	elapsed := time.Since(began)
	after := lengths()

	polls := float64(hosts) * elapsed.Seconds() / interval.Seconds()
	perPoll := float64(execs) / polls
	grown := 0
	for i := range before {
		grown += after[i] - before[i]
	}
	t.Logf("%d hosts x %d processes, %s interval, %s quiet: %d execs for %.0f host-polls = %.2f execs per host per poll; history events gained: %d (%.2f per host)",
		hosts, procs, interval, elapsed.Round(time.Second), execs, polls, perPoll, grown, float64(grown)/float64(hosts))
	if perPoll > 1.1 || perPoll < 0.8 {
		t.Fatalf("%.2f SSH execs per host per poll, want 1", perPoll)
	}
	if grown != 0 {
		t.Fatalf("a quiet minute added %d history events", grown)
	}
}
