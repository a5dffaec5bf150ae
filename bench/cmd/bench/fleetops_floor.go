package main

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
)

// fleetOpsFloorOps are the control ops the floor runs at fleet size, in
// order: start, then restart and stop of what the start found alive.
var fleetOpsFloorOps = []string{"start", "restart", "stop"}

// fleetOpsFloor runs drover's own host op for each identity of items (the
// same scripts, execs and check sleeps) over bare x/crypto/ssh, one
// connection per sshd host with at most sessions execs on it at once, as
// the worker has: what the fleet-size control ops cost the hosts and SSH
// alone, with no engine. It returns each op's wall time and CPU.
func (e *env) fleetOpsFloor(ctx context.Context, inventoryPath string, items []proc.Item, sessions int) (map[string]floorRun, error) {
	inv, err := inventory.Load(inventoryPath)
	if err != nil {
		return nil, err
	}
	cfg, err := e.floorConfig()
	if err != nil {
		return nil, err
	}
	r := &bareRunner{cfg: cfg, conns: map[string]*bareConn{}, sessions: sessions}
	defer r.close()
	acts := &activities.Activities{Inventory: inv, Runner: r}
	seen := make([]activities.HostOpOutput, len(items))
	took := map[string]floorRun{}
	for _, name := range fleetOpsFloorOps {
		op := map[string]proc.OpType{"start": proc.OpStart, "restart": proc.OpRestart, "stop": proc.OpStop}[name]
		errs := make([]error, len(items))
		cpu := markCPU(e.serverPid, e.bedHosts())
		began := time.Now()
		var wg sync.WaitGroup
		for i, it := range items {
			if it.Spec == nil {
				return took, fmt.Errorf("floor: %s has no spec", it.Target.IP)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := acts.HostOp(ctx, activities.HostOpInput{
					RequestID: fmt.Sprintf("floor-%s-%d", name, i), Op: op, Target: it.Target,
					Process: it.Process, Spec: *it.Spec, Pid: seen[i].Pid, StartTicks: seen[i].StartTicks,
				})
				switch {
				case err != nil:
					errs[i] = err
				case out.Result.Code != proc.CodeSuccess:
					errs[i] = fmt.Errorf("%d %s", out.Result.Code, out.Result.Message)
				}
				seen[i] = out
			}()
		}
		wg.Wait()
		took[name] = floorRun{Took: time.Since(began), CPU: cpu.since(e.serverPid, e.bedHosts())}
		for i, err := range errs {
			if err != nil {
				return took, fmt.Errorf("floor %s: %s: %w", name, items[i].Target.IP, err)
			}
		}
	}
	return took, nil
}

// floorRun is one floor op: its wall time, and the CPU the machine spent
// meanwhile (the floor's own in Worker, the hosts' in Rest).
type floorRun struct {
	Took time.Duration
	CPU  cpuSplit
}

// fleetOpsFloorMarkdown is the control ops' times against the floor's, by
// size: how much of each op is the engine's, and how much the hosts'.
func fleetOpsFloorMarkdown(b *strings.Builder, r *fleetOpsResult) {
	if len(r.Floor) == 0 {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	floorTableHead(b, "Fleet-size control ops against the floor", r.sizes, " %d: drover | floor | drover/floor |")
	for _, op := range fleetOpsFloorOps {
		w("| %s |", op)
		for _, n := range r.sizes {
			z, f := r.Runs[n][op], r.Floor[n][op]
			switch {
			case f.Took == 0:
				w(" %s | - | - |", fleetOpsCell(z))
			case !z.ok(n):
				w(" %s | %s | - |", fleetOpsCell(z), secs(f.Took.Seconds()))
			default:
				w(" %s | %s | %.2f× |", fleetOpsCell(z), secs(f.Took.Seconds()), z.Took.Seconds()/f.Took.Seconds())
			}
		}
		w("\n")
	}
	w("\nThe floor runs drover's own host op for every identity (the same scripts, execs and check sleeps; a restart of the incarnation the start found, in one exec) over bare x/crypto/ssh: one connection to each sshd host, at most %d sessions on it at once, no engine, no worker. It runs after drover's ops, on the same identities.", r.sessions)
	for _, n := range r.sizes {
		if e := r.FloorErr[n]; e != "" {
			w(" At %d identities it stopped: %s.", n, e)
		}
	}
	w("\n\n")
	fleetOpsCPUMarkdown(b, r)
}

// floorTableHead writes a floor table's title and head: an op column,
// then three columns per size, named by cols with the size in it.
func floorTableHead(b *strings.Builder, title string, sizes []int, cols string) {
	fmt.Fprintf(b, "#### %s\n\n| op |", title)
	for _, n := range sizes {
		fmt.Fprintf(b, cols, n)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|---|---|", len(sizes)) + "\n")
}

// fleetOpsCPUMarkdown is where each control op's CPU went, drover's and
// the floor's: what of an op's cost is the engine's and the worker's.
func fleetOpsCPUMarkdown(b *strings.Builder, r *fleetOpsResult) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	floorTableHead(b, "CPU seconds while each control op ran", r.sizes, " %d: drover, server / worker / hosts / rest | floor, its own / hosts / rest | drover/floor, all |")
	for _, op := range fleetOpsFloorOps {
		w("| %s |", op)
		for _, n := range r.sizes {
			z, f := r.Runs[n][op], r.Floor[n][op]
			if z == nil || z.Took == 0 {
				w(" - | - | - |")
				continue
			}
			c := z.CPU
			w(" %.1f / %.1f / %.1f / %.1f |", c.Server, c.Worker, c.Hosts, c.Rest-c.Hosts)
			if f.Took == 0 {
				w(" - | - |")
				continue
			}
			w(" %.1f / %.1f / %.1f | %.2f× |", f.CPU.Worker, f.CPU.Hosts, f.CPU.Rest-f.CPU.Hosts, c.total()/max(f.CPU.total(), 0.01))
		}
		w("\n")
	}
	w("\nThe machine's CPU seconds while the op ran: the engine's server process, the bench's own process (drover's worker runs in it; for the floor, the floor itself), the hosts (the sshd hosts' processes with the commands they ran and reaped) and the rest (the kernel's loopback network work, time the hypervisor took, the starter). On %d cores an op takes at least its CPU seconds over %d.\n\n", runtime.NumCPU(), runtime.NumCPU())
}
