// Command bench measures drover against the tools its users would pick
// instead (pssh, pdsh, Ansible) and against a bare Go SSH fan-out, on the
// same real sshd hosts, and measures what supervision costs and what each
// host op costs the engine (its persistence writes, from the dev server's
// own metrics). It prints a markdown table, writes it to
// bench/results/latest.md and draws bench/results/scaling.png. Run it with
// `make bench`; it needs root.
//
// Settings come from the environment:
//
//	BENCH_HOSTS        hosts of the main comparison (200)
//	BENCH_RUNS         runs per tool at BENCH_HOSTS; medians are reported (3)
//	BENCH_SCALE        host counts of the scaling series (50,200,500)
//	BENCH_SCALE_RUNS   runs per tool at the other scaling sizes (1)
//	BENCH_TOOLS        tools to run (drover,floor,pssh,pdsh,ansible)
//	BENCH_FANOUT       pssh -p and pdsh -f (the host count, at least 50)
//	BENCH_FORKS        Ansible forks (50)
//	BENCH_SUPERVISE    supervision run length; 0 skips it (2m)
//	BENCH_SUP_HOSTS    hosts supervised (BENCH_HOSTS)
//	BENCH_OUT          results directory (bench/results); a run writing
//	                   elsewhere leaves docs/benchmarks.md alone
//	BENCH_SQLITE_SYNC  full: the dev server's SQLite syncs every transaction
//	                   (its default), in a file on disk; otherwise WAL,
//	                   synced at checkpoints, on tmpfs when there is one
//	BENCH_TEMPORAL     drover's engine: dev (the pinned dev server) or
//	                   cluster (a Temporal server on PostgreSQL, as make
//	                   cluster runs it; results in bench/results/cluster
//	                   unless BENCH_OUT says otherwise) (dev)
//	BENCH_CLUSTER_SHARDS
//	                   the cluster's history shards (16)
//	BENCH_PARTS        what to measure: status, control (start, restart and
//	                   stop on BENCH_HOSTS), supervise, fleetops (register,
//	                   start, status, restart, stop over BENCH_FLEETOPS
//	                   identities, 200,10000, sharing BENCH_FLEETOPS_SSHD
//	                   sshd hosts, 20, with BENCH_FLEETOPS_SESSIONS
//	                   sessions on each one's connection, 8)
//	                   (status,control,supervise,fleetops);
//	                   or fleet alone (make bench-fleet): supervision of
//	                   BENCH_FLEET_HOSTS (2000) × BENCH_FLEET_PROCS (10) at
//	                   BENCH_FLEET_INTERVAL (10s) by BENCH_FLEET_WORKERS (2)
//	                   worker processes, quiet for BENCH_FLEET_QUIET (2m)
//
// Flags override the environment: --hosts (BENCH_HOSTS), --runs
// (BENCH_RUNS), --parts (BENCH_PARTS); `go run ./bench/cmd/bench --hosts 50
// --parts control` is a quick look at the control ops.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
)

// settings are the bench's knobs, from the environment.
type settings struct {
	hosts, runs, scaleRuns int
	scale                  []int
	tools                  []string
	fanout, forks          int
	supervise              time.Duration
	supHosts               int
	out, bin               string
	parts                  []string
	wfPollers, actPollers  int
	// temporal is the engine (BENCH_TEMPORAL: dev or cluster), shards a
	// cluster's history shards (BENCH_CLUSTER_SHARDS).
	temporal string
	shards   int
	// engine names a cluster once it runs; empty for the dev server.
	engine   string
	fleet    fleetSettings
	fleetOps fleetOpsSettings
}

// The parts of a bench run.
const (
	partStatus    = "status"
	partControl   = "control"
	partSupervise = "supervise"
	partFleet     = "fleet"
	partFleetOps  = "fleetops"
)

var allParts = []string{partStatus, partControl, partSupervise, partFleetOps}

func (s settings) part(p string) bool { return slices.Contains(s.parts, p) }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func loadSettings(args []string) (settings, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	hosts := fs.Int("hosts", envInt("BENCH_HOSTS", 200), "hosts of the main comparison and the control ops")
	runs := fs.Int("runs", envInt("BENCH_RUNS", 3), "runs per tool at --hosts")
	parts := fs.String("parts", envOr("BENCH_PARTS", strings.Join(allParts, ",")), "what to measure: "+strings.Join(allParts, ","))
	if err := fs.Parse(args); err != nil {
		return settings{}, err
	}
	if *hosts < 1 || *runs < 1 {
		return settings{}, fmt.Errorf("--hosts %d, --runs %d: each must be at least 1", *hosts, *runs)
	}
	s := settings{
		hosts: *hosts, runs: *runs, scaleRuns: envInt("BENCH_SCALE_RUNS", 1),
		fanout: envInt("BENCH_FANOUT", 0), forks: envInt("BENCH_FORKS", 50),
		out: os.Getenv("BENCH_OUT"), bin: filepath.Join(testbed.ModuleRoot(), "bin"),
		tools: []string{toolDrover, toolFloor, toolPssh, toolPdsh, toolAnsible},
	}
	for _, p := range strings.Split(*parts, ",") {
		if p == partFleet && *parts != partFleet {
			return s, fmt.Errorf("--parts: %s runs alone (make bench-fleet): its hosts are supervised by worker processes of their own", partFleet)
		}
		if !slices.Contains(allParts, p) && p != partFleet {
			return s, fmt.Errorf("--parts: unknown part %q; want some of %s, or %s alone", p, strings.Join(allParts, ","), partFleet)
		}
		s.parts = append(s.parts, p)
	}
	if s.part(partFleet) {
		f, err := loadFleetSettings()
		if err != nil {
			return s, err
		}
		s.fleet = f
	}
	if s.part(partFleetOps) {
		f, err := loadFleetOpsSettings()
		if err != nil {
			return s, err
		}
		s.fleetOps = f
	}
	if err := loadEngine(&s); err != nil {
		return s, err
	}
	s.supHosts = envInt("BENCH_SUP_HOSTS", s.hosts)
	// The worker's shipped defaults, unless told otherwise.
	s.wfPollers, s.actPollers = envInt("BENCH_WORKFLOW_POLLERS", 16), envInt("BENCH_ACTIVITY_POLLERS", 16)
	if s.out == "" {
		s.out = defaultOut()
		if s.temporal == temporalCluster {
			// Results on a cluster sit apart and leave the docs page alone.
			s.out = filepath.Join(defaultOut(), temporalCluster)
		}
	}
	scale := os.Getenv("BENCH_SCALE")
	if scale == "" {
		scale = "50,200,500"
	}
	for _, f := range strings.Split(scale, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return s, fmt.Errorf("BENCH_SCALE: %q is not a host count", f)
		}
		s.scale = append(s.scale, n)
	}
	if !slices.Contains(s.scale, s.hosts) {
		s.scale = append(s.scale, s.hosts)
	}
	slices.Sort(s.scale)
	s.scale = slices.Compact(s.scale)
	if v := os.Getenv("BENCH_TOOLS"); v != "" {
		s.tools = strings.Split(v, ",")
		for _, t := range s.tools {
			if !slices.Contains(allTools, t) {
				return s, fmt.Errorf("BENCH_TOOLS: unknown tool %q; want some of %s", t, strings.Join(allTools, ","))
			}
		}
	}
	s.supervise = 2 * time.Minute
	if !s.part(partSupervise) {
		s.supervise = 0
	} else if v := os.Getenv("BENCH_SUPERVISE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return s, fmt.Errorf("BENCH_SUPERVISE: %v", err)
		}
		s.supervise = d
	}
	return s, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func defaultOut() string { return filepath.Join(testbed.ModuleRoot(), "bench", "results") }

func (s settings) maxHosts() int {
	if s.part(partFleet) {
		return s.fleet.hosts
	}
	if len(s.parts) == 1 && s.part(partFleetOps) {
		// A simulated fleet still starts the bed with a host.
		return max(s.fleetOps.sshd, 1)
	}
	n := s.hosts
	if s.part(partFleetOps) {
		n = max(n, s.fleetOps.sshd)
	}
	if s.part(partStatus) {
		n = max(n, slices.Max(s.scale))
	}
	if s.supervise > 0 {
		n = max(n, s.supHosts)
	}
	return n
}

func (s settings) has(tool string) bool { return slices.Contains(s.tools, tool) }

func main() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("bench: ")
	s, err := loadSettings(os.Args[1:])
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dumpOnSignal(s.out)
	if err := run(ctx, s); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, s settings) error {
	began := time.Now()
	if err := os.MkdirAll(s.out, 0o755); err != nil {
		return err
	}
	rep := &report{settings: s, machine: describeMachine(s), began: began, sizes: map[int]map[string]*measure{}}
	availBefore := memAvailable()

	n := s.maxHosts()
	log.Printf("starting %d sshd hosts", n)
	bed, err := testbed.Start(testbed.Options{Hosts: n})
	if err != nil {
		return err
	}
	defer bed.Close()
	rep.bedStart = time.Since(began)
	availBed := memAvailable()

	metricsPort, err := testbed.FreePort()
	if err != nil {
		return err
	}
	eng, err := startEngine(s, metricsPort)
	if err != nil {
		return err
	}
	defer eng.stop()
	availServer := memAvailable()
	if eng.desc != "" {
		s.engine = eng.desc
		rep.settings, rep.machine = s, describeMachine(s)
	}

	e, err := newEnv(ctx, s, bed, eng.address)
	if err != nil {
		return err
	}
	e.metricsPort, e.serverPid = metricsPort, eng.pid
	defer e.close()
	if s.part(partFleet) {
		logf("%d hosts × %d processes at %s, %d worker processes", s.fleet.hosts, s.fleet.procs, s.fleet.interval, s.fleet.workers)
		r, err := e.fleetCost(ctx, s.fleet)
		if err != nil {
			log.Printf("fleet: %v", err)
		}
		return writeFleet(s, r, err, time.Since(began))
	}
	if len(s.parts) == 1 && s.part(partFleetOps) {
		return e.runFleetOps(ctx)
	}
	if err := e.prepareHosts(ctx); err != nil {
		return err
	}
	if s.part(partControl) {
		log.Printf("control ops: start, restart, stop on %d hosts, %d runs", s.hosts, s.runs)
		ctl, err := e.controlCompare(ctx, s.hosts, s.runs)
		if err != nil {
			return err
		}
		rep.control, rep.ctlRuns, rep.floorCPU = ctl, e.ctlRuns, e.floorCPU
	}

	for _, size := range s.scale {
		if !s.part(partStatus) {
			break
		}
		runs := s.scaleRuns
		if size == s.hosts {
			runs = s.runs
		}
		m := map[string]*measure{}
		rep.sizes[size] = m
		for _, tool := range s.tools {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Printf("%d hosts: %s, %d runs", size, tool, runs)
			res, err := e.measureTool(ctx, tool, size, runs)
			if err != nil {
				return fmt.Errorf("%s at %d hosts: %w", tool, size, err)
			}
			m[tool] = res
			log.Printf("%d hosts: %s cold %s warm %s", size, tool, fmtSecs(res.cold), fmtSecs(res.warm))
			if tool == toolDrover && size == n {
				// Every host now has a pooled connection and its sshd session.
				rep.memPerHost = float64(availBefore-availBed+availServer-memAvailable()) / float64(n)
				rep.memListener = float64(availBefore-availBed) / float64(n)
				rep.availBefore = availBefore
			}
		}
	}
	if s.has(toolDrover) && s.part(partStatus) {
		rep.drover = e.droverStats()
	}
	if s.supervise > 0 {
		log.Printf("supervision: %d hosts x %d processes at %s for %s", s.supHosts, supProcs, supInterval, s.supervise)
		// A failure here still leaves the comparison's results written.
		sup, err := e.superviseCost(ctx, s.supHosts, s.supervise)
		if err != nil {
			log.Printf("supervision: %v", err)
			rep.supErr = err
		}
		rep.sup = sup
	}
	if s.part(partFleetOps) {
		if err := e.runFleetOps(ctx); err != nil {
			return err
		}
	}
	rep.took = time.Since(began)
	return rep.write()
}

// sqlitePragmas is the dev server's SQLite mode: write-ahead log, synced at
// checkpoints (BENCH_SQLITE_SYNC=full syncs every transaction, the SQLite
// default).
func sqlitePragmas() []string {
	if os.Getenv("BENCH_SQLITE_SYNC") == "full" {
		return nil
	}
	return []string{"journal_mode=wal", "synchronous=normal"}
}

// dumpOnSignal writes every goroutine's stack to DIR/goroutines-TIME.txt
// on SIGUSR1: what the bench's worker waits on when a run stalls.
func dumpOnSignal(dir string) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	go func() {
		for range ch {
			path := filepath.Join(dir, "goroutines-"+time.Now().Format("150405")+".txt")
			f, err := os.Create(path)
			if err != nil {
				log.Printf("goroutine dump: %v", err)
				continue
			}
			_ = pprof.Lookup("goroutine").WriteTo(f, 2)
			_ = f.Close()
			log.Printf("goroutines written to %s", path)
		}
	}()
}
