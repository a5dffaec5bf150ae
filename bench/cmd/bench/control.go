package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
)

// The process the control ops act on: a copy of sleep in /data/ctl, started
// and stopped by the same command lines by every tool.
const (
	ctlNS    = "bench"
	ctlName  = "ctl"
	ctlDir   = "/data/" + ctlName
	ctlPid   = ctlDir + "/" + ctlName + ".pid"
	ctlCheck = time.Second // start_check_secs and stop_check_secs, as in the issue
	// ctlStart and ctlStop are the spec's start_cmd and stop_cmd; run in
	// setup_path. The stop removes the pid file: the test bed's hosts share
	// one pid space, so a stale pid soon names another host's copy.
	ctlStart = `setsid ./` + ctlName + ` 86400 </dev/null >/dev/null 2>&1 & echo $! > ` + ctlName + `.pid`
	ctlStop  = `kill $(cat ` + ctlName + `.pid) && rm -f ` + ctlName + `.pid`
)

// The control ops, in the order each round runs them: a start leaves the
// process running, a restart replaces it, a stop ends it.
var ctlOps = []struct {
	name string
	op   proc.OpType
}{{"start", proc.OpStart}, {"restart", proc.OpRestart}, {"stop", proc.OpStop}}

// ctlAlive is the peers' liveness check of the pid file's pid: the pid
// runs the program (a pid reused by another program, or a zombie, whose exe
// link cannot be read, is not it).
const ctlAlive = `{ read -r p < ` + ctlPid + ` 2>/dev/null && [ "$(readlink /proc/$p/exe 2>/dev/null)" = ` + ctlDir + "/" + ctlName + ` ]; }`

// peerControlScript is what pssh and Ansible run for op: the spec's command
// lines with the same checks drover makes (alive before, the start check
// after start_check_secs, the stop check each second up to
// stop_check_secs). Each host prints one "ok ..." line on success.
func peerControlScript(op string) string {
	start := `if ` + ctlAlive + `; then echo "already running $p"; else ` + ctlStart + `; sleep 1; if ` + ctlAlive + `; then echo "ok started $p"; else echo "start failed"; fi; fi`
	stop := ctlStop + `; i=0; while ` + ctlAlive + ` && [ $i -lt 1 ]; do sleep 1; i=$((i+1)); done; if ` + ctlAlive + `; then echo "stop failed"; else echo "ok stopped"; fi`
	switch op {
	case "start":
		return `cd ` + ctlDir + ` && ` + start
	case "stop":
		return `cd ` + ctlDir + ` && if ` + ctlAlive + `; then ` + stop + `; else echo "not running"; fi`
	default: // restart without restart_cmd: stop if running, then start
		return `cd ` + ctlDir + ` && if ` + ctlAlive + `; then ` + strings.Replace(stop, `echo "ok stopped"`, `:`, 1) + `; fi; ` + start
	}
}

func ctlSpec() proc.Spec {
	return proc.Spec{ProcName: ctlName, SetupPath: ctlDir, PidPath: ctlPid, StartCmd: ctlStart, StopCmd: ctlStop,
		StartCheck: ctlCheck, StopCheck: ctlCheck}
}

// ctlMeasure is one op's timings per tool, cold and warm, in seconds.
type ctlMeasure map[string]*measure

// controlCompare runs start, restart and stop on the first n hosts with
// every tool, runs times, and returns the timings per op.
func (e *env) controlCompare(ctx context.Context, n, runs int) (map[string]ctlMeasure, error) {
	defer func(was time.Duration) { e.cfg.SuperviseInterval = was }(e.cfg.SuperviseInterval)
	e.cfg.SuperviseInterval = ctlInterval
	hosts := e.bed.Hosts[:n]
	if err := e.prepareControl(ctx, hosts); err != nil {
		return nil, err
	}
	out := map[string]ctlMeasure{}
	for _, o := range ctlOps {
		out[o.name] = ctlMeasure{}
	}
	for _, tool := range e.s.tools {
		if tool == toolPdsh {
			continue // pssh stands for the parallel shells here
		}
		for r := 0; r < runs; r++ {
			log.Printf("control ops on %d hosts: %s, run %d of %d", n, tool, r+1, runs)
			if err := e.controlRound(ctx, tool, hosts, out); err != nil {
				return nil, fmt.Errorf("control ops with %s: %w", tool, err)
			}
		}
	}
	return out, nil
}

// prepareControl copies the program to every host and registers its spec
// with drover (register_proc_info, measured).
func (e *env) prepareControl(ctx context.Context, hosts []*testbed.Host) error {
	if err := forHosts(hosts, func(h *testbed.Host) error {
		_, err := h.Exec(fmt.Sprintf(`mkdir -p %s && cp "$(command -v sleep)" %s/%s && rm -f %s`, ctlDir, ctlDir, ctlName, ctlPid))
		return err
	}); err != nil {
		return err
	}
	if !e.s.has(toolDrover) {
		return nil
	}
	if e.worker == nil {
		if err := e.startWorker(); err != nil {
			return err
		}
	}
	r, err := e.droverCtlRegister(ctx, hosts)
	e.ctlRuns = append(e.ctlRuns, r)
	return err
}

// controlRound runs start, restart and stop twice with one tool: cold (a
// new worker, new connections or no ssh master before each op), then warm
// (the same worker, connections or masters).
func (e *env) controlRound(ctx context.Context, tool string, hosts []*testbed.Host, out map[string]ctlMeasure) error {
	var peerDir string
	var floor *floorControl
	defer func() {
		if peerDir != "" {
			stopMasters(peerDir)
		}
		if floor != nil {
			floor.close()
		}
	}()
	for _, warm := range []bool{false, true} {
		// drover's first warm round is profiled: the worker runs in this
		// process, and nothing else here works while the starter waits.
		if tool == toolDrover && warm && !e.ctlProfiled {
			e.ctlProfiled = true
			stop, err := startProfile(filepath.Join(e.s.out, "drover-control-cpu.pprof"))
			if err != nil {
				return err
			}
			defer stop()
		}
		for _, o := range ctlOps {
			var took float64
			var err error
			switch tool {
			case toolDrover:
				if !warm {
					if err := e.startWorker(); err != nil {
						return err
					}
				}
				var r droverCtlRun
				r, err = e.droverCtlOp(ctx, o.name, o.op, proc.CodeSuccess, hosts)
				r.Warm = warm
				took = r.Total
				e.ctlRuns = append(e.ctlRuns, r)
			case toolFloor:
				if !warm {
					if floor != nil {
						floor.close()
					}
					if floor, err = e.newFloorControl(hosts); err != nil {
						return err
					}
				}
				cpu := markCPU(e.serverPid, e.bedHosts())
				took, err = floor.run(ctx, o.op)
				e.floorCPU[ctlKey(o.name, warm)] = append(e.floorCPU[ctlKey(o.name, warm)], cpu.since(e.serverPid, e.bedHosts()))
			default:
				if !warm && peerDir != "" {
					stopMasters(peerDir)
				}
				peerDir, took, err = e.peerControl(ctx, tool, o.name, hosts, peerDir, !warm)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", o.name, err)
			}
			m := out[o.name][tool]
			if m == nil {
				m = &measure{}
				out[o.name][tool] = m
			}
			if warm {
				m.warm = append(m.warm, took)
			} else {
				m.cold = append(m.cold, took)
			}
			log.Printf("  %s %s %s: %.2fs", tool, o.name, map[bool]string{false: "cold", true: "warm"}[warm], took)
		}
	}
	if tool == toolDrover {
		// A status of the stopped process, for what a status costs the
		// engine per host (its time is the status part's).
		r, err := e.droverCtlOp(ctx, "status", proc.OpStatus, proc.CodeNotRunning, hosts)
		r.Warm = true
		e.ctlRuns = append(e.ctlRuns, r)
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
	}
	return nil
}

// peerControl runs a peer's control script for op once. A fresh run gets a
// new directory (no ssh master); otherwise dir's masters are reused.
func (e *env) peerControl(ctx context.Context, tool, op string, hosts []*testbed.Host, dir string, fresh bool) (string, float64, error) {
	if fresh || dir == "" {
		peerSeq++
		// Short: ssh's control socket paths under it must fit a Unix
		// socket's 108 bytes.
		dir = filepath.Join(e.dir, fmt.Sprintf("c%d", peerSeq))
		if err := os.MkdirAll(filepath.Join(dir, "home"), 0o700); err != nil {
			return dir, 0, err
		}
	}
	args, env, err := e.peerCommand(tool, dir, hosts, peerControlScript(op))
	if err != nil {
		return dir, 0, err
	}
	stdout, stderr, took, runErr := runPeer(ctx, args, env, dir)
	if n := countOK(stdout); runErr != nil || n != len(hosts) {
		return dir, 0, fmt.Errorf("%s %s: %d of %d hosts ok (%v): %s%s", tool, op, n, len(hosts), runErr, notOK(stdout), tail(string(stderr)))
	}
	return dir, took, nil
}

// notOK is the output without its success lines: what went wrong.
func notOK(out []byte) string {
	var kept []string
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "ok ") {
			kept = append(kept, line)
		}
	}
	return tail(strings.Join(kept, "\n"))
}

// countOK counts output lines that report success.
func countOK(out []byte) int {
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "ok ") {
			n++
		}
	}
	return n
}

// floorControl runs drover's own host op (the same scripts, execs and
// check sleeps) over bare x/crypto/ssh connections, with no Temporal and
// no pool logic: what the control ops cost the hosts and SSH alone.
type floorControl struct {
	hosts []*testbed.Host
	conns *bareRunner
	acts  *activities.Activities
	// seen is the incarnation each host's last op found alive, which the
	// next op is told, as a host workflow tells it.
	seen map[string]activities.HostOpOutput
}

func (e *env) newFloorControl(hosts []*testbed.Host) (*floorControl, error) {
	cfg, err := e.floorConfig()
	if err != nil {
		return nil, err
	}
	inv, err := inventory.Load(e.bed.InventoryPath)
	if err != nil {
		return nil, err
	}
	r := &bareRunner{cfg: cfg, conns: map[string]*bareConn{}}
	if e.floorSeen == nil {
		e.floorSeen = map[string]activities.HostOpOutput{}
	}
	return &floorControl{hosts: hosts, conns: r, acts: &activities.Activities{Inventory: inv, Runner: r}, seen: e.floorSeen}, nil
}

func (f *floorControl) close() { f.conns.close() }

// run runs op on every host at once and checks each succeeded. The first
// run of a floorControl dials (cold); later runs reuse the connections.
func (f *floorControl) run(ctx context.Context, op proc.OpType) (float64, error) {
	errs := make([]error, len(f.hosts))
	outs := make([]activities.HostOpOutput, len(f.hosts))
	began := time.Now()
	var wg sync.WaitGroup
	for i, h := range f.hosts {
		seen := f.seen[h.IP]
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := f.acts.HostOp(ctx, activities.HostOpInput{
				RequestID: "floor", Op: op, Target: proc.Target{IP: h.IP},
				Process: proc.ProcessID{Namespace: ctlNS, Name: ctlName}, Spec: ctlSpec(),
				Pid: seen.Pid, StartTicks: seen.StartTicks,
			})
			outs[i] = out
			switch {
			case err != nil:
				errs[i] = err
			case out.Result.Code != proc.CodeSuccess:
				errs[i] = fmt.Errorf("%d %s", out.Result.Code, out.Result.Message)
			}
		}()
	}
	wg.Wait()
	took := time.Since(began).Seconds()
	for i, err := range errs {
		if err != nil {
			return 0, fmt.Errorf("floor: host %s: %w", f.hosts[i].IP, err)
		}
		if outs[i].Alive {
			f.seen[f.hosts[i].IP] = outs[i]
		}
	}
	return took, nil
}
