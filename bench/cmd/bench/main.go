// Command bench measures drover against the tools its users would pick
// instead (pssh, pdsh, Ansible) and against a bare Go SSH fan-out, on the
// same real sshd hosts, and measures what supervision costs. It prints a
// markdown table, writes it to bench/results/latest.md and draws
// bench/results/scaling.png. Run it with `make bench`; it needs root.
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
//	                   elsewhere leaves README.md alone
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/workflows"
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
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func loadSettings() (settings, error) {
	s := settings{
		hosts: envInt("BENCH_HOSTS", 200), runs: envInt("BENCH_RUNS", 3), scaleRuns: envInt("BENCH_SCALE_RUNS", 1),
		fanout: envInt("BENCH_FANOUT", 0), forks: envInt("BENCH_FORKS", 50),
		out: os.Getenv("BENCH_OUT"), bin: filepath.Join(testbed.ModuleRoot(), "bin"),
		tools: []string{toolDrover, toolFloor, toolPssh, toolPdsh, toolAnsible},
	}
	s.supHosts = envInt("BENCH_SUP_HOSTS", s.hosts)
	if s.out == "" {
		s.out = defaultOut()
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
	if v := os.Getenv("BENCH_SUPERVISE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return s, fmt.Errorf("BENCH_SUPERVISE: %v", err)
		}
		s.supervise = d
	}
	return s, nil
}

func defaultOut() string { return filepath.Join(testbed.ModuleRoot(), "bench", "results") }

func (s settings) maxHosts() int { return max(slices.Max(s.scale), s.supHosts) }

func (s settings) has(tool string) bool { return slices.Contains(s.tools, tool) }

func main() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("bench: ")
	s, err := loadSettings()
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, s); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, s settings) error {
	began := time.Now()
	if err := os.MkdirAll(s.out, 0o755); err != nil {
		return err
	}
	rep := &report{settings: s, machine: describeMachine(), began: began, sizes: map[int]map[string]*measure{}}
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

	srv, err := testbed.StartTemporal(testbed.TemporalOptions{SearchAttributes: workflows.SearchAttributeTypes})
	if err != nil {
		return err
	}
	defer srv.Stop()
	availServer := memAvailable()

	e, err := newEnv(ctx, s, bed, srv)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.prepareHosts(ctx); err != nil {
		return err
	}

	for _, size := range s.scale {
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
	if s.has(toolDrover) {
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
	rep.took = time.Since(began)
	return rep.write()
}
