package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
)

// The fleet-size ops section of the docs page lies between these markers;
// a run of the fleetops part into the default results directory rewrites it.
const (
	fleetOpsBegin    = "<!-- fleet-size ops results: written by make bench -->\n"
	fleetOpsEnd      = "<!-- end of fleet-size ops results -->\n"
	fleetOpsSimBegin = "<!-- simulated fleet-size ops results: written by make bench-sim -->\n"
	fleetOpsSimEnd   = "<!-- end of simulated fleet-size ops results -->\n"
)

// simulatedLatency is what the worker's simulated hosts add to each
// command (internal/cli).
const simulatedLatency = "2 ms"

// The server's limits the histories are held against.
const (
	historyEventLimit = 51200
	historyByteLimit  = 50 << 20
)

// fleetOpsLimits are the most each op may take at fleetOpsTargetSize
// identities, through what callers run.
var fleetOpsLimits = map[string]time.Duration{
	"register": 2 * time.Minute, "start": 3 * time.Minute, "status": 90 * time.Second,
	"restart": 3 * time.Minute, "stop": 3 * time.Minute,
}

// fleetOpsTargetSize is the fleet size the time targets are for.
const fleetOpsTargetSize = 10000

// fleetOpsMarkdown is the fleet-size tables: each op's time at each size
// and its ratio to the baseline, every key's code, the targets, and the
// engine's writes per host op.
func fleetOpsMarkdown(r *fleetOpsResult, runErr error, machine []string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	base, top := r.sizes[0], r.sizes[len(r.sizes)-1]
	if r.simulated {
		w("### Fleet-size ops on simulated hosts (answered in-process by the worker: a simulation, no sshd)\n\n")
	} else {
		w("### Fleet-size ops (identities sharing %d sshd hosts through `address`)\n\n", r.sshd)
	}
	w("Measured %s on %s.", time.Now().UTC().Format("2006-01-02 15:04 UTC"), strings.Join(machine, ", "))
	if !strings.Contains(strings.Join(machine, ", "), "drover's engine") {
		w(" Drover's engine is the pinned Temporal dev server (%s).", devServerStore())
	}
	w("\n\n")
	if runErr != nil {
		w("The run stopped early: %v.\n\n", runErr)
	}
	w("| op |")
	for _, n := range r.sizes {
		w(" %d identities | every key's code (code×keys) |", n)
	}
	w(" ratio %d/%d (linear: %.0f×) |\n|---|", top, base, float64(top)/float64(base))
	for range r.sizes {
		w("---|---|")
	}
	w("---|\n")
	for _, op := range fleetOpsOps {
		w("| %s |", op)
		for _, n := range r.sizes {
			w(" %s | %s |", fleetOpsCell(r.Runs[n][op]), fleetOpsCodes(r.Runs[n][op]))
		}
		a, z := r.Runs[base][op], r.Runs[top][op]
		if a.ok(base) && z.ok(top) && a.Took > 0 {
			w(" %.1f× |\n", z.Took.Seconds()/a.Took.Seconds())
		} else {
			w(" - |\n")
		}
	}
	w("\nRegister is `starter api register_proc_info -f BODY --wait`, one body naming every identity with the seed's one spec; the others are `starter VERB --hosts group:… --wait -o json`, as an operator runs them, results included; each key's code is as the op's answer gave it. ")
	if r.simulated {
		w("Every identity is a simulated host (inventory `transport: simulated`): the worker answers drover's scripts in-process as a host would, after %s, so the figures are drover's and the engine's, without sshd's. ", simulatedLatency)
	} else {
		w("The identities share %d sshd hosts, and so one connection to each, with up to %d sessions on it (`max_sessions_per_host` %d; drover's default is 8, for one host's connection). ", r.sshd, r.sessions, r.sessions)
	}
	w("After the register each identity is given a pid file of its own (update_proc_info through the workflow API, not timed) before the control ops.\n\n")

	at := fmt.Sprintf("at %d identities", top)
	if top != fleetOpsTargetSize {
		at += fmt.Sprintf(" (the time targets are for %d)", fleetOpsTargetSize)
	}
	w("| %s | measured | target | |\n|---|---|---|---|\n", at)
	for _, op := range fleetOpsOps {
		z, limit := r.Runs[top][op], fleetOpsLimits[op]
		switch {
		case z == nil:
			w("| %s time | not run | ≤ %s | **missed** |\n", op, fmtLimit(limit))
		case top != fleetOpsTargetSize:
			w("| %s time | %s | ≤ %s at %d | not measured there |\n", op, secs(z.Took.Seconds()), fmtLimit(limit), fleetOpsTargetSize)
		default:
			w("| %s time | %s | ≤ %s | %s |\n", op, secs(z.Took.Seconds()), fmtLimit(limit), verdict(z.ok(top) && z.Took <= limit))
		}
	}
	allOK, allKeys, ticks, busy := true, true, true, 0
	maxEv, maxBytes := 0, 0
	for _, op := range fleetOpsOps {
		for _, n := range r.sizes {
			if z := r.Runs[n][op]; z != nil {
				busy += z.Codes[proc.CodeInternal] + z.Codes[proc.CodeTimeout]
			}
		}
		z := r.Runs[top][op]
		if z == nil {
			allOK, allKeys, ticks = false, false, false
			continue
		}
		allOK = allOK && z.ok(top)
		allKeys = allKeys && z.Keys == top
		if op != "register" {
			// Progress comes from the task's counts, a tick at a time,
			// never by fetching every result.
			ticks = ticks && z.Ticks > 1
		}
		maxEv = max(maxEv, z.TaskEvents, z.ChunkEvents)
		maxBytes = max(maxBytes, z.TaskBytes, z.ChunkBytes)
	}
	w("| every op completes, every key its op's success | %s | all | %s |\n", fleetOpsEach(r, top, fleetOpsOps, func(z *fleetOpsRun) int { return z.Codes[proc.CodeSuccess] }), verdict(allOK))
	w("| keys answered 9199 or 9105, any size | %d | 0 | %s |\n", busy, verdict(busy == 0))
	w("| batches given up and run again (their hosts' answers kept) | %s | reported | |\n", fleetOpsEach(r, top, fleetOpsOps, func(z *fleetOpsRun) int { return z.RunAgain }))
	if !r.simulated {
		w("| SSH execs per host op (probes and commands, one session each) | %s | reported | |\n", fleetOpsEvery(r, top, fleetOpsOps[1:], func(z *fleetOpsRun) string {
			return fmt.Sprintf("%.2f", float64(z.Execs)/float64(top))
		}))
	}
	w("| get_proc_operate_result returns every key | %s | %d | %s |\n", fleetOpsEach(r, top, fleetOpsOps, func(z *fleetOpsRun) int { return z.Keys }), top, verdict(allKeys))
	w("| largest task or chunk history | %d events, %.2f MB | far below %d events, %d MB | %s |\n", maxEv, float64(maxBytes)/(1<<20),
		historyEventLimit, historyByteLimit>>20, verdict(maxEv > 0 && maxEv < historyEventLimit/10 && maxBytes < historyByteLimit/10))
	w("| `--wait` progress drawn from counts (ticks per op) | %s | more than one | %s |\n\n", fleetOpsEach(r, top, fleetOpsOps[1:], func(z *fleetOpsRun) int { return z.Ticks }), verdict(ticks))

	fleetOpsFloorMarkdown(&b, r)
	var cols []*writesColumn
	for _, n := range r.sizes {
		c := newWritesColumn(fmt.Sprintf("%d identities", n))
		for op, z := range r.Runs[n] {
			c.add(op, z.Engine, n)
		}
		cols = append(cols, c)
	}
	writesMarkdown(&b, "#### Engine writes per host op, fleet-size ops", fmt.Sprintf("%s after its answer (the worker runs with no_supervision: the op alone)", metricsLag), cols)
	return b.String()
}

// fmtLimit is a time target as the issue gives it: "2 min", "90 s".
func fmtLimit(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d min", int(d/time.Minute))
	}
	return fmt.Sprintf("%d s", int(d/time.Second))
}

// fleetOpsCell is an op's time, with what went wrong when not every key
// answered success.
func fleetOpsCell(run *fleetOpsRun) string {
	switch {
	case run == nil:
		return "not run"
	case run.Err != "":
		return fmt.Sprintf("%s; %s", secs(run.Took.Seconds()), oneLineOf(run.Err))
	case run.TaskDone > 0:
		return fmt.Sprintf("%s (answered; its task ended at %s)", secs(run.Took.Seconds()), secs(run.TaskDone.Seconds()))
	}
	return secs(run.Took.Seconds())
}

// fleetOpsCodes is "0×9990, 9105×10", with an example of each failure.
func fleetOpsCodes(run *fleetOpsRun) string {
	if run == nil || len(run.Codes) == 0 {
		return "-"
	}
	return codeSummary(run.Codes, run.Example)
}

// fleetOpsEach lists one figure of each op at n identities, as "op N".
func fleetOpsEach(r *fleetOpsResult, n int, ops []string, figure func(*fleetOpsRun) int) string {
	return fleetOpsEvery(r, n, ops, func(z *fleetOpsRun) string { return strconv.Itoa(figure(z)) })
}

// fleetOpsEvery is fleetOpsEach with a figure already written.
func fleetOpsEvery(r *fleetOpsResult, n int, ops []string, figure func(*fleetOpsRun) string) string {
	var parts []string
	for _, op := range ops {
		if z := r.Runs[n][op]; z != nil {
			parts = append(parts, op+" "+figure(z))
		}
	}
	return strings.Join(parts, ", ")
}

// oneLineOf keeps a message to one short line of a table cell.
func oneLineOf(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// writeFleetOps writes the fleet-size table to fleetops.md (simulated
// hosts: fleetops-simulated.md) and, for a run into the default results
// directory, into the docs page's section of it.
func writeFleetOps(s settings, md string) error {
	name, begin, end := "fleetops.md", fleetOpsBegin, fleetOpsEnd
	if s.fleetOps.simulated {
		name, begin, end = "fleetops-simulated.md", fleetOpsSimBegin, fleetOpsSimEnd
	}
	path := filepath.Join(s.out, name)
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s", path)
	if s.out != defaultOut() {
		return nil
	}
	return refreshSection(docsPage(), begin, end, md)
}

// loadFleetOpsSettings reads BENCH_FLEETOPS (identity counts, the first
// the baseline) and BENCH_FLEETOPS_SSHD.
func loadFleetOpsSettings() (fleetOpsSettings, error) {
	f := fleetOpsSettings{sshd: envInt("BENCH_FLEETOPS_SSHD", 20), sessions: envInt("BENCH_FLEETOPS_SESSIONS", 8)}
	if f.sessions < 1 || f.sessions > testbed.MaxSessions-2 {
		return f, fmt.Errorf("BENCH_FLEETOPS_SESSIONS %d: must be 1 to %d (the testbed's sshd MaxSessions, less 2 for kills)", f.sessions, testbed.MaxSessions-2)
	}
	switch v := os.Getenv("BENCH_FLEETOPS_HOSTS"); v {
	case "", "sshd":
	case "simulated":
		f.simulated, f.sshd = true, 0
	default:
		return f, fmt.Errorf("BENCH_FLEETOPS_HOSTS %q: want sshd or simulated", v)
	}
	// BENCH_FLEETOPS_OPS runs the first ops only (register and start
	// always come first: the others need them), e.g. register,start,status.
	if v := os.Getenv("BENCH_FLEETOPS_OPS"); v != "" {
		ops := strings.Split(v, ",")
		if len(ops) > len(fleetOpsOps) || !slices.Equal(ops, fleetOpsOps[:len(ops)]) {
			return f, fmt.Errorf("BENCH_FLEETOPS_OPS %q: want the first ops of %s, in order", v, strings.Join(fleetOpsOps, ","))
		}
		fleetOpsOps = ops
	}
	for _, v := range strings.Split(envOr("BENCH_FLEETOPS", "200,10000"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return f, fmt.Errorf("BENCH_FLEETOPS: %q is not an identity count", v)
		}
		f.sizes = append(f.sizes, n)
	}
	return f, nil
}

// runFleetOps runs the fleetops part and writes its table (fleetops.md and
// its own section of the docs page); a failed op is in the table, and so is a run
// that stopped early.
func (e *env) runFleetOps(ctx context.Context) error {
	if e.s.fleetOps.simulated {
		log.Printf("fleet-size ops: %v simulated hosts", e.s.fleetOps.sizes)
	} else {
		log.Printf("fleet-size ops: %v identities on %d sshd hosts", e.s.fleetOps.sizes, e.s.fleetOps.sshd)
	}
	r, err := e.fleetOps(ctx, e.s.fleetOps)
	md := fleetOpsMarkdown(r, err, describeMachine(e.s))
	fmt.Print(md)
	if werr := writeFleetOps(e.s, md); werr != nil {
		return werr
	}
	return err
}
