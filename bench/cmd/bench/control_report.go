package main

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
)

// checkSleeps is the fixed wait each op spends in its checks on a host
// whose process behaves: the start check after start_cmd; a stop whose
// process is gone at the first check waits nothing.
func checkSleeps(op string) float64 {
	if op == "stop" {
		return 0
	}
	return ctlCheck.Seconds()
}

// controlMarkdown renders the control-op comparison, its targets and
// drover's phase breakdown.
func (r *report) controlMarkdown(b *strings.Builder) {
	w := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	n, runs := r.settings.hosts, r.settings.runs
	w("### Control ops on %d hosts: start, restart, stop (median of %d runs)\n\n", n, runs)
	w("Measured %s on %s.\n\n", r.began.UTC().Format("2006-01-02 15:04 UTC"), strings.Join(r.machine, ", "))
	w("| tool | start cold | start warm | restart cold | restart warm | stop cold | stop warm |\n|---|---|---|---|---|---|---|\n")
	for _, tool := range []string{toolDrover, toolFloor, toolPssh, toolAnsible} {
		w("| %s |", ctlLabel(tool))
		for _, o := range ctlOps {
			m := r.control[o.name][tool]
			if m == nil {
				note := "not run"
				if missing(tool) {
					note = "not installed"
				}
				w(" %s | %s |", note, note)
				continue
			}
			w(" %s | %s |", secs(median(m.cold)), secs(median(m.warm)))
		}
		w("\n")
	}
	w("\nEvery tool runs the same command lines (start_cmd `%s`, stop_cmd `%s`; restart is stop then start) with start_check_secs and stop_check_secs %d, and every host must answer success.\n",
		ctlStart, ctlStop, int(ctlCheck.Seconds()))
	w("Cold: a new worker (drover), new connections (floor), no ssh master (peers), before each op. Warm: the same op on the same worker, connections or ssh masters (ControlPersist).\n")
	if r.settings.engine != "" {
		w("Drover's engine is a %s (fsync and synchronous commit on) with eager activity execution on; its worker has %d workflow and %d activity task pollers.\n\n",
			r.settings.engine, r.settings.wfPollers, r.settings.actPollers)
	} else {
		w("Drover's engine is the pinned Temporal dev server (%s) with eager activity execution on; its worker has %d workflow and %d activity task pollers.\n\n",
			devServerStore(), r.settings.wfPollers, r.settings.actPollers)
	}

	w("### Control-op targets (medians)\n\n| op | drover cold / pssh cold | ≤ 0.8× | drover warm / floor warm | ≤ 1.5× |\n|---|---|---|---|---|\n")
	for _, o := range ctlOps {
		d, p, f := r.control[o.name][toolDrover], r.control[o.name][toolPssh], r.control[o.name][toolFloor]
		w("| %s |", o.name)
		for _, t := range []struct {
			peer  *measure
			warm  bool
			limit float64
		}{{p, false, 0.8}, {f, true, 1.5}} {
			if d == nil || t.peer == nil {
				w(" - | not run |")
				continue
			}
			x, y := median(d.cold), median(t.peer.cold)
			if t.warm {
				x, y = median(d.warm), median(t.peer.warm)
			}
			w(" %s | %s |", ratio(x, y), verdict(x <= t.limit*y))
		}
		w("\n")
	}
	w("\nBoth are measured in the same run: pssh cold has no ssh master; the floor warm reuses its connections and runs drover's own execs and check sleeps, so what drover adds warm is its engine.\n\n")
	r.ctlPhases(b)
	col := newWritesColumn(fmt.Sprintf("control, %d hosts", n))
	for _, run := range r.ctlRuns {
		col.add(run.Op, run.Engine, run.Hosts)
	}
	window := fmt.Sprintf("%s after its answer (the hosts are supervised, as drover ships: by then the watch the op started again has polled once, at the %s interval, and sent its first heartbeat; the window also holds supervision's steady heartbeats, about one per host per 40 s)",
		ctlSettle, ctlInterval)
	writesMarkdown(b, "### Engine writes per host op", window, []*writesColumn{col})
}

func ctlLabel(tool string) string {
	switch tool {
	case toolDrover:
		return "drover (`starter api operate_process --wait`)"
	case toolFloor:
		return "floor (drover's host op over bare x/crypto/ssh, no Temporal)"
	case toolPssh:
		return "pssh (`parallel-ssh -p N`)"
	case toolAnsible:
		return "Ansible (`ansible -m shell`, pipelining, forks 50)"
	}
	return tool
}

// missing reports whether a peer's command is not installed.
func missing(tool string) bool {
	cmd := map[string]string{toolPssh: "parallel-ssh", toolAnsible: "ansible"}[tool]
	if cmd == "" {
		return false
	}
	_, err := exec.LookPath(cmd)
	return err != nil
}

// ctlPhases is drover's phase breakdown per op, medians over runs.
func (r *report) ctlPhases(b *strings.Builder) {
	if len(r.ctlRuns) == 0 {
		return
	}
	w := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	type col struct {
		op   string
		warm bool
		runs []droverCtlRun
	}
	var cols []col
	for _, o := range ctlOps {
		for _, warm := range []bool{false, true} {
			c := col{op: o.name, warm: warm}
			for _, run := range r.ctlRuns {
				if run.Op == o.name && run.Warm == warm {
					c.runs = append(c.runs, run)
				}
			}
			cols = append(cols, c)
		}
	}
	w("### Where drover's control ops spend their time (%d hosts; per-host phases as p50 / max over hosts, medians over runs)\n\n| phase |", r.settings.hosts)
	for _, c := range cols {
		w(" %s %s |", c.op, map[bool]string{false: "cold", true: "warm"}[c.warm])
	}
	w("\n|---|")
	for range cols {
		w("---|")
	}
	w("\n")
	one := func(name string, f func(droverCtlRun) float64) {
		w("| %s |", name)
		for _, c := range cols {
			xs := make([]float64, len(c.runs))
			for i, run := range c.runs {
				xs[i] = f(run)
			}
			w(" %.2f |", median(xs))
		}
		w("\n")
	}
	pair := func(name string, f func(droverCtlRun) [2]float64) {
		w("| %s |", name)
		for _, c := range cols {
			var p50, mx []float64
			for _, run := range c.runs {
				v := f(run)
				p50, mx = append(p50, v[0]), append(mx, v[1])
			}
			w(" %.2f / %.2f |", median(p50), median(mx))
		}
		w("\n")
	}
	one("starter exec → task started", func(x droverCtlRun) float64 { return x.ToStart })
	one("task started → first Deliver batch started", func(x droverCtlRun) float64 { return x.ToDeliver })
	one("Deliver batches (about 50 items each)", func(x droverCtlRun) float64 { return float64(x.Batches) })
	one("longest Deliver batch", func(x droverCtlRun) float64 { return x.Batch })
	one("first batch started → last batch done", func(x droverCtlRun) float64 { return x.Delivering })
	pair("task started → host's workflow task that took the op update started", func(x droverCtlRun) [2]float64 { return x.Taken })
	pair("→ op recorded (local activity: SSH + checks)", func(x droverCtlRun) [2]float64 { return x.Ran })
	w("| of which check sleeps |")
	for _, c := range cols {
		w(" %.2f |", checkSleeps(c.op))
	}
	w("\n")
	pair("→ update completed", func(x droverCtlRun) [2]float64 { return x.Answered })
	pair("task started → update completed", func(x droverCtlRun) [2]float64 { return x.Answer })
	one("hosts whose op outlasted the local budget (went on as an activity)", func(x droverCtlRun) float64 { return float64(x.HandedOver) })
	one("last batch done → task closed", func(x droverCtlRun) float64 { return x.Closed })
	one("task closed → starter exit", func(x droverCtlRun) float64 { return x.Fetch })
	one("**total**", func(x droverCtlRun) float64 { return x.Total })
	one("engine (total − slowest host op)", func(x droverCtlRun) float64 { return x.Total - x.Ran[1] })
	one("SSH execs per host", func(x droverCtlRun) float64 { return float64(x.Execs) / float64(x.Hosts) })
	one("SSH handshakes", func(x droverCtlRun) float64 { return float64(x.Handshakes) })
	one("workflow tasks per host op", func(x droverCtlRun) float64 { return float64(x.HostTasks) })
	one("task workflow tasks", func(x droverCtlRun) float64 { return float64(x.TaskTasks) })
	one("server requests per host", func(x droverCtlRun) float64 { return total(x.Engine.Requests) / float64(x.Hosts) })
	one("CPU s: the engine's server", func(x droverCtlRun) float64 { return x.CPU.Server })
	one("CPU s: drover's worker (the bench's process)", func(x droverCtlRun) float64 { return x.CPU.Worker })
	one("CPU s: the hosts (their sshd and the commands it ran)", func(x droverCtlRun) float64 { return x.CPU.Hosts })
	one("CPU s: the rest (the kernel's network work, the starter)", func(x droverCtlRun) float64 { return x.CPU.Rest - x.CPU.Hosts })
	one(fmt.Sprintf("cores busy (all CPU s / %d cores × total)", runtime.NumCPU()), func(x droverCtlRun) float64 {
		return (x.CPU.Server + x.CPU.Worker + x.CPU.Rest) / (float64(runtime.NumCPU()) * x.Total)
	})
	w("| floor's CPU s: its process / the rest |")
	for _, c := range cols {
		var own, rest []float64
		for _, u := range r.floorCPU[ctlKey(c.op, c.warm)] {
			own, rest = append(own, u.Worker), append(rest, u.Server+u.Rest)
		}
		if len(own) == 0 {
			w(" - |")
			continue
		}
		w(" %.2f / %.2f |", median(own), median(rest))
	}
	w("\n")
	w("\nA host's op update is accepted in the workflow task that runs the op as a local activity, so its acceptance is written with the op's end: the task's start is when the host took the request.\n")
	w("Server requests per host by operation, warm: start: %s; restart: %s; stop: %s.\n\n",
		topRequests(r.ctlRuns, "start"), topRequests(r.ctlRuns, "restart"), topRequests(r.ctlRuns, "stop"))
}

// topRequests lists the dev server's busiest operations in the last warm
// run of op, per host.
func topRequests(runs []droverCtlRun, op string) string {
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].Op == op && runs[i].Warm && len(runs[i].Engine.Requests) > 0 {
			return perOp(runs[i].Engine.Requests, float64(runs[i].Hosts), 8)
		}
	}
	return "not measured"
}
