package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/drover-sh/drover/activities"

	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

const (
	toolDrover  = "drover"
	toolFloor   = "floor"
	toolPssh    = "pssh"
	toolPdsh    = "pdsh"
	toolAnsible = "ansible"
)

var allTools = []string{toolDrover, toolFloor, toolPssh, toolPdsh, toolAnsible}

// The process every tool asks about: a copy of sleep started on each host
// by testbed.Host.StartSample, its pid in /data/bench/probe.pid.
const (
	probeNS   = "bench"
	probeName = "probe"
	pidFile   = "/data/" + probeNS + "/" + probeName + ".pid"
)

// probeScript is what the peers and the floor run: read the pid file, check
// /proc, print one line. Builtins only, so it costs one shell per host.
const probeScript = `if read -r p < ` + pidFile + ` && [ -d "/proc/$p" ]; then echo "running $p"; else echo "not running"; fi`

// measure is one tool's timings at one host count, in seconds.
type measure struct {
	cold, warm []float64
	// richWarm is the floor running drover's own status probe, warm: what
	// drover's richer probe costs the hosts, apart from drover's machinery.
	richWarm []float64
}

// env is the bench's running world: hosts, engine, drover's worker.
type env struct {
	s      settings
	bed    *testbed.Bed
	cfg    config.Config
	client client.Client
	worker *cli.Worker
	dir    string // peers' config files, request bodies

	// droverRuns are the phase breakdowns of drover's runs at s.hosts.
	droverRuns []droverRun
	floorConns floorPool
	// floorSeen is, per host, the incarnation the floor's last control op
	// found alive, as a host workflow keeps it for the next op.
	floorSeen map[string]activities.HostOpOutput
	// ctlRuns are the phase breakdowns of drover's control ops.
	ctlRuns []droverCtlRun
	// floorCPU is the CPU the floor's control ops took, by ctlKey.
	floorCPU map[string][]cpuSplit
	// ctlProfiled: the control ops' CPU profile is written.
	ctlProfiled bool
	// metricsPort serves the dev server's metrics; 0 when it does not.
	metricsPort int
	// serverPid is the dev server's process, whose CPU the control part
	// counts apart; 0 on a cluster.
	serverPid int
	// logDir holds the fleet-size ops' worker log and kept histories.
	logDir string
}

func newEnv(ctx context.Context, s settings, bed *testbed.Bed, address string) (*env, error) {
	e := &env{s: s, bed: bed, dir: filepath.Join(bed.Dir, "bench"), floorCPU: map[string][]cpuSplit{}}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return nil, err
	}
	// Drover as shipped (shard watches among the rest), on the bench's
	// engine, hosts and interval.
	e.cfg = config.Defaults()
	e.cfg.TemporalAddress, e.cfg.TaskQueue, e.cfg.Inventory = address, "bench", bed.InventoryPath
	e.cfg.LogLevel, e.cfg.SuperviseInterval = "error", supInterval
	e.cfg.WorkflowTaskPollers, e.cfg.ActivityTaskPollers = s.wfPollers, s.actPollers
	c, err := client.Dial(client.Options{HostPort: address, Logger: quietLog{}})
	if err != nil {
		return nil, err
	}
	e.client = c
	return e, nil
}

func (e *env) close() {
	e.floorConns.close()
	if e.worker != nil {
		e.worker.Stop()
	}
	e.client.Close()
}

type quietLog struct{}

func (quietLog) Debug(string, ...any) {}
func (quietLog) Info(string, ...any)  {}
func (quietLog) Warn(string, ...any)  {}
func (quietLog) Error(string, ...any) {}

// startWorker replaces the worker with a new one: a new SSH pool with no
// connections, and a new Temporal worker with nothing cached.
func (e *env) startWorker() error {
	if e.worker != nil {
		e.worker.Stop()
		e.worker = nil
	}
	w, err := cli.StartWorker(e.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	e.worker = w
	// Let its pollers reach the server before anything is timed.
	time.Sleep(time.Second)
	return nil
}

// prepareHosts starts the sample on every host and registers it with drover.
func (e *env) prepareHosts(ctx context.Context) error {
	log.Printf("starting the sample process on %d hosts", len(e.bed.Hosts))
	errs := make([]error, len(e.bed.Hosts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, h := range e.bed.Hosts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, errs[i] = h.StartSample(probeNS, probeName, "")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if !e.s.has(toolDrover) && e.s.supervise == 0 {
		return nil
	}
	if err := e.startWorker(); err != nil {
		return err
	}
	spec := proc.Spec{ProcName: probeName, SetupPath: "/data/" + probeNS, PidPath: pidFile}
	var items []proc.Item
	for _, h := range e.bed.Hosts {
		sp := spec
		items = append(items, proc.Item{Target: proc.Target{IP: h.IP}, Process: proc.ProcessID{Namespace: probeNS, Name: probeName}, Spec: &sp})
	}
	log.Printf("registering the sample with drover on %d hosts", len(items))
	res, err := e.operate(ctx, proc.OpSpecRegister, items)
	if err != nil {
		return err
	}
	return allSucceeded("register", res)
}

// operate runs one op through the workflow API and waits for it.
func (e *env) operate(ctx context.Context, op proc.OpType, items []proc.Item) (workflows.OperateResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	in := workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: op, Items: items}
	if err := engine.StartOperate(ctx, e.client, e.cfg.TaskQueue, in); err != nil {
		return workflows.OperateResult{}, err
	}
	return engine.WaitOperateAll(ctx, e.client, in.TaskID)
}

func allSucceeded(what string, res workflows.OperateResult) error {
	for _, r := range res.Results {
		if r.Code != proc.CodeSuccess {
			return fmt.Errorf("%s %s: %d %s", what, r.Key, r.Code, r.Message)
		}
	}
	return nil
}

// measureTool times one tool at size hosts, runs times cold and warm.
func (e *env) measureTool(ctx context.Context, tool string, size, runs int) (*measure, error) {
	hosts := e.bed.Hosts[:size]
	m := &measure{}
	for r := 0; r < runs; r++ {
		var cold, warm float64
		var err error
		switch tool {
		case toolDrover:
			cold, warm, err = e.droverPair(ctx, size, size == e.s.hosts)
		case toolFloor:
			var rich float64
			cold, warm, rich, err = e.floorPair(ctx, hosts)
			m.richWarm = append(m.richWarm, rich)
		default:
			cold, warm, err = e.peerPair(ctx, tool, hosts)
		}
		if err != nil {
			return nil, err
		}
		m.cold = append(m.cold, cold)
		m.warm = append(m.warm, warm)
	}
	return m, nil
}

// median of xs; 0 when empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtSecs(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fs", median(xs))
}

// countRunning counts output lines that report the process running.
func countRunning(out []byte) int {
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "running ") && !strings.Contains(line, "not running") {
			n++
		}
	}
	return n
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
