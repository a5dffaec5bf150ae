package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
)

// The fleet part supervises many hosts with worker processes of their own,
// as a production deploy runs them, and measures what the issue of fleet
// supervision asks: the server's requests while quiet, the workers' and
// hosts' CPU, whether ops wait behind supervision, a mass failure and the
// loss of a worker. It runs alone (make bench-fleet): its hosts' workflows
// live on a task queue no other part's worker polls.

const (
	fleetNS    = "fleet"
	fleetQueue = "bench-fleet"
	fleetCheck = time.Second // start_check_secs of the supervised processes
)

// fleetSettings are the fleet part's knobs, from the environment.
type fleetSettings struct {
	hosts, procs, workers int
	interval, quiet       time.Duration
}

func loadFleetSettings() (fleetSettings, error) {
	f := fleetSettings{hosts: envInt("BENCH_FLEET_HOSTS", 2000), procs: envInt("BENCH_FLEET_PROCS", 10),
		workers: envInt("BENCH_FLEET_WORKERS", 2), interval: 10 * time.Second, quiet: 2 * time.Minute}
	for name, d := range map[string]*time.Duration{"BENCH_FLEET_INTERVAL": &f.interval, "BENCH_FLEET_QUIET": &f.quiet} {
		if v := os.Getenv(name); v != "" {
			p, err := time.ParseDuration(v)
			if err != nil || p <= 0 {
				return f, fmt.Errorf("%s: %q is not a positive duration", name, v)
			}
			*d = p
		}
	}
	return f, nil
}

// fleetResult is what the fleet part measured.
type fleetResult struct {
	fleetSettings
	StartTook time.Duration
	// Quiet window.
	Quiet    time.Duration
	Requests map[string]float64 // frontend requests in drover's namespace, by operation
	// ServerOwn is the server's own frontend requests (its system
	// namespace's workers), which no client sends: per second.
	ServerOwn        float64
	ReqPerSecPer1000 float64
	HostPolls        float64
	ExecsPerPoll     float64
	EventsPerPoll    float64
	WorkerCores      []float64 // each worker's CPU, in cores
	WorkerRSSMiB     []float64
	HostMsPerPoll    float64 // CPU the hosts spent per poll (sshd, shell, probe)
	// Resident is a resident agent's cost per check cycle of as many
	// processes, measured beside the same hosts.
	Resident residentCost
	// An op while supervising: a restart of one process on a tenth of the
	// hosts; its host activities' schedule-to-start, from the hosts'
	// histories.
	OpHosts      int
	OpTook       time.Duration
	OpActivities int
	OpWithin1s   int
	OpMaxToStart float64
	// OpSDKToStart is the workers' SDK mean schedule-to-start of the ops
	// queue's activities during the op, seconds (of OpSDKCount); -1 when
	// not served.
	OpSDKToStart  float64
	OpSDKCount    int
	Mass          restartTimes
	Loss          restartTimes
	LossBound     time.Duration
	LossWithin    int
	DoubleStarts  int // victims of either phase started more than once
	UnexpectedRun int // restarts of processes nobody killed
}

// restartTimes is one kill phase: how many were killed, came back, and how
// long (kill → process_restart_success) each took; Detect is kill → the
// host workflow told, Engine the rest less the start on the host.
type restartTimes struct {
	Killed, Restarted    int
	P50, P95, Max        float64
	DetectP50, DetectP95 float64
	EngineP50, EngineP95 float64
	HostOpP50, HostOpP95 float64
}

func fleetName(p int) string { return "svc" + strconv.Itoa(p) }

func fleetDir(p int) string { return "/data/" + fleetNS + strconv.Itoa(p) }

// fleetProg is the program of process p on host h: a name of its own on
// every host, as the test bed's hosts share one kernel's pids. A restart on
// one host may take the pid a process killed on another left in its pid
// file; under one name everywhere, that pid would pass for the killed
// process (alive, and its exe matches proc_name), which on a host of its
// own cannot happen.
func fleetProg(h *testbed.Host, p int) string {
	ip := strings.Split(h.IP, ".")
	return fmt.Sprintf("svc%d_%s_%s", p, ip[len(ip)-2], ip[len(ip)-1])
}

// fleetSpec is one supervised process: a copy of sleep, each start noted
// in starts.log so a double start shows.
func fleetSpec(h *testbed.Host, p int) proc.Spec {
	dir, prog := fleetDir(p), fleetProg(h, p)
	return proc.Spec{
		ProcName: prog, SetupPath: dir, PidPath: dir + "/svc.pid",
		StartCmd: "echo start >> starts.log; setsid ./" + prog + " 86400 </dev/null >/dev/null 2>&1 & echo $! > svc.pid",
		AutoType: proc.AutoResident, StartCheck: fleetCheck, OpTimeout: 30 * time.Second,
	}
}

// installFleet copies sleep into every process's directory on every host,
// from this side of the hosts' bind-mounted /data: 20,000 copies through
// sshd would take minutes.
func installFleet(hosts []*testbed.Host, procs int) error {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return err
	}
	prog, err := os.ReadFile(sleep)
	if err != nil {
		return err
	}
	return forHosts(hosts, func(h *testbed.Host) error {
		for p := 0; p < procs; p++ {
			dir := filepath.Join(h.DataDir, strings.TrimPrefix(fleetDir(p), "/data/"))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			_ = os.Remove(filepath.Join(dir, "starts.log"))
			if err := os.WriteFile(filepath.Join(dir, fleetProg(h, p)), prog, 0o755); err != nil {
				return err
			}
		}
		return nil
	})
}

// fleetPid reads a supervised process's pid from the host's /data.
func fleetPid(h *testbed.Host, p int) (int, error) {
	b, err := os.ReadFile(filepath.Join(h.DataDir, strings.TrimPrefix(fleetDir(p), "/data/"), "svc.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// fleetStarts counts the starts a process's starts.log noted.
func fleetStarts(h *testbed.Host, p int) int {
	b, _ := os.ReadFile(filepath.Join(h.DataDir, strings.TrimPrefix(fleetDir(p), "/data/"), "starts.log"))
	return strings.Count(string(b), "start\n")
}

// workerProc is a worker binary running as its own process.
type workerProc struct {
	cmd     *exec.Cmd
	metrics string // host:port of its /metrics
}

// startWorkerProc runs bin/worker on the fleet's queue with its metrics
// served, and waits until they answer.
func (e *env) startWorkerProc(f fleetSettings, n int) (*workerProc, error) {
	port, err := testbed.FreePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(e.dir, fmt.Sprintf("worker-%d.log", n)))
	if err != nil {
		return nil, err
	}
	w := &workerProc{metrics: fmt.Sprintf("127.0.0.1:%d", port)}
	w.cmd = exec.Command(filepath.Join(e.s.bin, "worker"))
	w.cmd.Env = append(os.Environ(),
		"DROVER_TEMPORAL_ADDRESS="+e.cfg.TemporalAddress, "DROVER_TASK_QUEUE="+fleetQueue,
		"DROVER_INVENTORY="+e.cfg.Inventory, "DROVER_SUPERVISE_INTERVAL="+f.interval.String(),
		"DROVER_METRICS_LISTEN="+w.metrics, "DROVER_LOG_LEVEL=warn", "DROVER_LIMIT_POLLS=3",
		// The documented sizing: a shard watch per 250 hosts, and
		// pollers that scale down while quiet.
		fmt.Sprintf("DROVER_WATCH_SHARDS=%d", (f.hosts+249)/250), "DROVER_POLLER_AUTOSCALING=true")
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := w.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := scrapeMetrics(w.metrics); err == nil {
			return w, nil
		}
		if time.Now().After(deadline) {
			w.kill()
			return nil, fmt.Errorf("worker %d: metrics at %s never answered; see %s", n, w.metrics, logf.Name())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (w *workerProc) kill() {
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	_, _ = w.cmd.Process.Wait()
}

// cpuAndRSS is the process's user+system CPU seconds and resident MiB.
func (w *workerProc) cpuAndRSS() (float64, float64) {
	return procCPU(w.cmd.Process.Pid, false), procRSS(w.cmd.Process.Pid)
}

// sumMetric adds a series over workers, every label set whose name starts
// with prefix and contains each of the label matches.
func sumMetric(workers []*workerProc, prefix string, has ...string) float64 {
	total := 0.0
	for _, w := range workers {
		m, err := scrapeMetrics(w.metrics)
		if err != nil {
			continue
		}
	next:
		for k, v := range m {
			if !strings.HasPrefix(k, prefix) {
				continue
			}
			for _, h := range has {
				if !strings.Contains(k, h) {
					continue next
				}
			}
			total += v
		}
	}
	return total
}

// procCPU is a process's user+system CPU seconds, with its reaped
// children's when children is set.
func procCPU(pid int, children bool) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// Fields from state (3rd): utime is the 14th, stime 15th, cutime
	// 16th, cstime 17th of the whole line.
	if len(f) < 15 {
		return 0
	}
	n := 2
	if children {
		n = 4
	}
	ticks := 0.0
	for i := 11; i < 11+n; i++ {
		v, _ := strconv.ParseFloat(f[i], 64)
		ticks += v
	}
	return ticks / 100 // USER_HZ
}

func procRSS(pid int) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// hostsCPU is the CPU seconds every process under the hosts' sshd
// listeners has used, reaped children included: the sessions the polls
// open, their shells and what the probes run. The supervised processes
// leave that tree when they detach, and sleep costs nothing anyway.
func hostsCPU(hosts []*testbed.Host) float64 {
	roots := map[int]bool{}
	for _, h := range hosts {
		if p := h.Pid(); p > 0 {
			roots[p] = true
		}
	}
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	total := 0.0
	for pid := range parent {
		for p, depth := pid, 0; p > 1 && depth < 64; p, depth = parent[p], depth+1 {
			if roots[p] {
				total += procCPU(pid, true)
				break
			}
		}
	}
	return total
}

func logf(format string, args ...any) { log.Printf("fleet: "+format, args...) }

// sleepUntil waits until cond holds or d passes; it reports whether cond held.
func sleepUntil(ctx context.Context, d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		if cond() {
			return true
		}
		if sleepCtx(ctx, time.Second) != nil {
			return false
		}
	}
	return cond()
}
