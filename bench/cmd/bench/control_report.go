package main

import (
	"fmt"
	"os/exec"
	"sort"
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
	sync := "SQLite in WAL mode, synced at checkpoints"
	if sqlitePragmas() == nil {
		sync = "SQLite synced at every transaction"
	}
	w("Drover's engine is the pinned Temporal dev server (%s) with eager activity execution on; its worker has %d workflow and %d activity task pollers.\n\n",
		sync, r.settings.wfPollers, r.settings.actPollers)

	w("### Control-op targets (drover against each tool, cold / warm)\n\n| op | ≤ 0.3× pssh | ≤ 0.1× Ansible | ≤ 2× floor |\n|---|---|---|---|\n")
	for _, o := range ctlOps {
		w("| %s |", o.name)
		for _, t := range []struct {
			tool  string
			limit float64
		}{{toolPssh, 0.3}, {toolAnsible, 0.1}, {toolFloor, 2}} {
			d, p := r.control[o.name][toolDrover], r.control[o.name][t.tool]
			if d == nil || p == nil {
				w(" - |")
				continue
			}
			var cells []string
			for _, pair := range [][2][]float64{{d.cold, p.cold}, {d.warm, p.warm}} {
				x, y := median(pair[0]), median(pair[1])
				cells = append(cells, fmt.Sprintf("%s %s", ratio(x, y), mark(x <= t.limit*y)))
			}
			w(" %s |", strings.Join(cells, " / "))
		}
		w("\n")
	}
	w("\n")
	r.ctlPhases(b)
}

func mark(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
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
	one("task started → hosts signalled (Dispatch done)", func(x droverCtlRun) float64 { return x.Dispatched })
	pair("task started → host's op signal", func(x droverCtlRun) [2]float64 { return x.Signalled })
	pair("op signal → HostOp scheduled (host workflow task)", func(x droverCtlRun) [2]float64 { return x.ToSchedule })
	pair("HostOp schedule → start", func(x droverCtlRun) [2]float64 { return x.ToStartAct })
	pair("HostOp on the host: SSH + checks", func(x droverCtlRun) [2]float64 { return x.HostOp })
	w("| of which check sleeps |")
	for _, c := range cols {
		w(" %.2f |", checkSleeps(c.op))
	}
	w("\n")
	pair("HostOp done → reply sent", func(x droverCtlRun) [2]float64 { return x.ToReply })
	one("last reply → task closed", func(x droverCtlRun) float64 { return x.Closed })
	one("task closed → starter exit", func(x droverCtlRun) float64 { return x.Fetch })
	one("**total**", func(x droverCtlRun) float64 { return x.Total })
	one("engine (total − slowest HostOp)", func(x droverCtlRun) float64 { return x.Total - x.HostOp[1] })
	one("SSH execs per host", func(x droverCtlRun) float64 { return float64(x.Execs) / float64(r.settings.hosts) })
	one("SSH handshakes", func(x droverCtlRun) float64 { return float64(x.Handshakes) })
	one("workflow tasks per host op", func(x droverCtlRun) float64 { return float64(x.HostTasks) })
	one("task workflow tasks", func(x droverCtlRun) float64 { return float64(x.TaskTasks) })
	one("server requests per host", func(x droverCtlRun) float64 {
		t := 0.0
		for _, v := range x.Requests {
			t += v
		}
		return t / float64(r.settings.hosts)
	})
	w("\nServer requests per host by operation (warm start): %s.\n\n", topRequests(r.ctlRuns, r.settings.hosts))
}

// topRequests lists the dev server's busiest operations in the last warm
// start, per host.
func topRequests(runs []droverCtlRun, hosts int) string {
	var last *droverCtlRun
	for i := range runs {
		if runs[i].Op == "start" && runs[i].Warm {
			last = &runs[i]
		}
	}
	if last == nil || len(last.Requests) == 0 {
		return "not measured"
	}
	type kv struct {
		k string
		v float64
	}
	var xs []kv
	for k, v := range last.Requests {
		xs = append(xs, kv{k, v})
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].v > xs[j].v })
	var out []string
	for i, x := range xs {
		if i == 8 {
			break
		}
		out = append(out, fmt.Sprintf("%s %.1f", x.k, x.v/float64(hosts)))
	}
	return strings.Join(out, ", ")
}
