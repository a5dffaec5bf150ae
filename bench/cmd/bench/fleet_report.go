package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
)

// The fleet section of the docs page lies between these markers; make
// bench-fleet replaces it with its own tables.
const (
	fleetBegin = "<!-- fleet bench results: written by make bench-fleet -->\n"
	fleetEnd   = "<!-- end of fleet bench results -->\n"
)

// fleetMarkdown is the fleet part's tables: each figure next to its target.
func fleetMarkdown(r *fleetResult, err error, machine []string, took time.Duration) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("### Fleet supervision (%d hosts × %d processes, %s interval, %d worker processes, %d shard watches)\n\n", r.hosts, r.procs, r.interval, r.workers, (r.hosts+249)/250)
	w("Measured %s on %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), strings.Join(machine, ", "))
	if err != nil {
		w("The run stopped early: %v. Figures measured before that are below; the others are 0.\n\n", err)
	}
	maxCores := 0.0
	for _, c := range r.WorkerCores {
		maxCores = max(maxCores, c)
	}
	perWorkerHosts := r.hosts / max(r.workers, 1)
	w("| measure | value | target | |\n|---|---|---|---|\n")
	w("| server (frontend) requests/s per 1,000 hosts, quiet, all operations | %.2f | ≤ 1 | %s |\n", r.ReqPerSecPer1000, verdict(r.ReqPerSecPer1000 <= 1))
	w("| SSH execs per host per poll | %.2f | 1 | %s |\n", r.ExecsPerPoll, verdict(r.ExecsPerPoll > 0.8 && r.ExecsPerPoll < 1.2))
	w("| history events per host per quiet poll | %.3f | 0 | %s |\n", r.EventsPerPoll, verdict(r.EventsPerPoll == 0))
	// A worker's CPU goes with its polls: scaled to 2,000 hosts polled
	// every 10 s, the target's load.
	at2000 := maxCores * 2000 / float64(max(perWorkerHosts, 1)) * r.interval.Seconds() / 10
	w("| busiest worker's CPU (%d hosts each, a poll each per %s), cores | %.2f (%.2f scaled to 2,000 hosts at 10 s) | ≤ 1 for 2,000 hosts at 10 s | %s |\n",
		perWorkerHosts, r.interval, maxCores, at2000, verdict(at2000 <= 1))
	hostCPU := fmt.Sprintf("%.1f ms (all hosts: %.2f cores at this interval)", r.HostMsPerPoll, r.HostMsPerPoll/1000*float64(r.hosts)/r.interval.Seconds())
	if r.Resident.Err == "" {
		w("| host CPU per poll (sshd session, shell, probe) | %s; a resident agent, monit, on %d processes: %.2f ms per check cycle and %.0f MiB held; drover %.1f× that per poll | below the resident agent's | %s |\n",
			hostCPU, r.procs, r.Resident.MsPerCycle, r.Resident.RSSMiB, r.HostMsPerPoll/max(r.Resident.MsPerCycle, 0.001), verdict(r.HostMsPerPoll < r.Resident.MsPerCycle))
	} else {
		w("| host CPU per poll (sshd session, shell, probe) | %s | below a resident agent's (not measured: %s) | |\n", hostCPU, r.Resident.Err)
	}
	w("| op's host activities started ≤ 1 s after schedule | %d of %d (max %.2f s) | all | %s |\n", r.OpWithin1s, r.OpActivities, r.OpMaxToStart,
		verdict(r.OpActivities > 0 && r.OpWithin1s == r.OpActivities))
	if r.OpSDKToStart >= 0 {
		w("| workers' SDK mean schedule-to-start of the ops queue's activities during the op (%d) | %.2f s | ≤ 1 s | %s |\n",
			r.OpSDKCount, r.OpSDKToStart, verdict(r.OpSDKToStart <= 1))
	}
	w("| mass failure: killed 10%% (%d), restarted | %d | all | %s |\n", r.Mass.Killed, r.Mass.Restarted, verdict(r.Mass.Killed > 0 && r.Mass.Restarted == r.Mass.Killed))
	w("| mass failure: kill → restarted p50 / p95 | %.1f / %.1f s | | |\n", r.Mass.P50, r.Mass.P95)
	w("| of which detection (kill → host workflow told) p50 / p95 | %.1f / %.1f s | ≤ interval | |\n", r.Mass.DetectP50, r.Mass.DetectP95)
	w("| of which the start on the host p50 / p95 | %.1f / %.1f s | start_check %s | |\n", r.Mass.HostOpP50, r.Mass.HostOpP95, fleetCheck)
	w("| of which the engine p50 / p95 | %.1f / %.1f s | | |\n", r.Mass.EngineP50, r.Mass.EngineP95)
	w("| worker SIGKILLed: processes killed after, running again within %s | %d of %d (max %.1f s) | all | %s |\n", r.LossBound, r.LossWithin, r.Loss.Killed, r.Loss.Max,
		verdict(r.Loss.Killed > 0 && r.LossWithin == r.Loss.Killed))
	w("| double starts of killed processes / restarts of processes not killed | %d / %d | 0 / 0 | %s |\n", r.DoubleStarts, r.UnexpectedRun, verdict(r.DoubleStarts == 0 && r.UnexpectedRun == 0))
	w("\nQuiet window %s; starting the %d processes on their hosts and registering them as managed took %s; a restart of one process on %d hosts while supervising took %s.\n\n",
		r.Quiet.Round(time.Second), r.hosts*r.procs, r.StartTook.Round(time.Second), r.OpHosts, r.OpTook.Round(100*time.Millisecond))
	if len(r.Requests) > 0 {
		w("Frontend requests in drover's namespace in the quiet window, by operation (per second per 1,000 hosts; " +
			"the server's history and matching services pass some of them on and count them again, which are not requests to it):\n\n" +
			"| operation | requests/s per 1,000 hosts |\n|---|---|\n")
		ops := make([]string, 0, len(r.Requests))
		for op := range r.Requests {
			ops = append(ops, op)
		}
		sort.Slice(ops, func(i, j int) bool { return r.Requests[ops[i]] > r.Requests[ops[j]] })
		for _, op := range ops {
			w("| %s | %.3f |\n", op, r.Requests[op]/r.Quiet.Seconds()/float64(r.hosts)*1000)
		}
		w("\nNot counted above: the server's own workers (its system namespace) sent %.2f frontend requests/s in the same window, "+
			"with no drover worker involved; they cost the same with no hosts at all.\n\n", r.ServerOwn)
	}
	w("Worker RSS at the end of the quiet window: ")
	for i, m := range r.WorkerRSSMiB {
		if i > 0 {
			w(", ")
		}
		w("%.0f MiB", m)
	}
	w(". The whole run took %s.\n", took.Round(time.Second))
	return b.String()
}

// writeFleet prints the fleet tables, writes them to fleet.md and, for a
// run into the default results directory, into the docs page.
func writeFleet(s settings, r *fleetResult, runErr error, took time.Duration) error {
	md := fleetMarkdown(r, runErr, describeMachine(s), took)
	fmt.Print(md)
	path := filepath.Join(s.out, "fleet.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s", path)
	if s.out != defaultOut() || runErr != nil {
		return runErr
	}
	return refreshSection(docsPage(), fleetBegin, fleetEnd, md)
}

// docsPage is the page the results of a run into the default results
// directory are written into, each part between its own markers.
func docsPage() string {
	return filepath.Join(testbed.ModuleRoot(), "docs", "benchmarks.md")
}

// refreshSection replaces what lies between begin and end in the file.
func refreshSection(path, begin, end, body string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(data)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		log.Printf("%s has no %q marker pair; left alone", path, strings.TrimSpace(begin))
		return nil
	}
	log.Printf("refreshed %s", path)
	return os.WriteFile(path, []byte(s[:i+len(begin)]+body+s[j:]), 0o644)
}
