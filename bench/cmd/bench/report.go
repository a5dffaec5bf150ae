package main

import (
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// report collects everything measured and renders it.
type report struct {
	settings settings
	machine  []string
	began    time.Time
	took     time.Duration
	bedStart time.Duration

	sizes  map[int]map[string]*measure
	drover droverStats
	sup    *supResult
	supErr error

	control map[string]ctlMeasure // by op
	ctlRuns []droverCtlRun
	// floorCPU is the floor's control ops' CPU, by ctlKey.
	floorCPU map[string][]cpuSplit

	availBefore             int64
	memPerHost, memListener float64 // bytes
}

// The reference measurements (200 hosts, `true`, median of 3) and
// the targets derived from them.
const (
	refFloorCold = 1.9
	refFloorWarm = 0.27
	refPssh      = 13.6
	refPdsh      = 13.0
	refAnsible   = 46.5
)

func (r *report) write() error {
	md := r.markdown()
	fmt.Print(md)
	path := filepath.Join(r.settings.out, "latest.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s", path)
	if !r.settings.part(partStatus) {
		return nil // no scaling series; a partial run leaves the docs alone
	}
	png := filepath.Join(r.settings.out, "scaling.png")
	if err := r.plot(png); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	log.Printf("wrote %s", png)
	if r.settings.out != defaultOut() || len(r.settings.parts) != len(allParts) {
		return nil // a trial run elsewhere, or of some parts, leaves the docs alone
	}
	return refreshSection(docsPage(), benchBegin, benchEnd, md+"\n![hosts against seconds per tool](../bench/results/scaling.png)\n")
}

// The bench results on the docs page are everything between these
// markers; each run replaces them with its own tables.
const (
	benchBegin = "<!-- bench results: written by make bench -->\n"
	benchEnd   = "<!-- end of bench results -->\n"
)

func (r *report) med(size int, tool string, warm bool) float64 {
	m := r.sizes[size][tool]
	if m == nil {
		return 0
	}
	if warm {
		return median(m.warm)
	}
	return median(m.cold)
}

func secs(x float64) string {
	if x == 0 {
		return "-"
	}
	if x < 10 {
		return fmt.Sprintf("%.2f s", x)
	}
	return fmt.Sprintf("%.1f s", x)
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func (r *report) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	n := r.settings.hosts
	runs := r.settings.runs
	if r.control != nil {
		r.controlMarkdown(&b)
	}
	if !r.settings.part(partStatus) {
		r.tailMarkdown(&b)
		return b.String()
	}
	w("### Status of one process on %d hosts (median of %d runs)\n\n", n, runs)
	w("Measured %s on %s.\n\n", r.began.UTC().Format("2006-01-02 15:04 UTC"), strings.Join(r.machine, ", "))
	w("| tool | cold | warm | drover/tool cold | drover/tool warm |\n|---|---|---|---|---|\n")
	dc, dw := r.med(n, toolDrover, false), r.med(n, toolDrover, true)
	for _, tool := range r.settings.tools {
		c, wm := r.med(n, tool, false), r.med(n, tool, true)
		rc, rw := ratio(dc, c), ratio(dw, wm)
		if tool == toolDrover {
			rc, rw = "", ""
		}
		w("| %s | %s | %s | %s | %s |\n", toolLabel(tool, r.settings), secs(c), secs(wm), rc, rw)
	}
	w("\nCold: a new worker (drover), new connections (floor), no ssh master (peers). Warm: a second op on the same worker; the floor reuses its connections; the peers reuse the ssh masters (ControlPersist) the cold run left.\n")
	w("Every run's output is checked: all %d hosts must answer running.\n\n", n)

	fc, fw := r.med(n, toolFloor, false), r.med(n, toolFloor, true)
	pc, ac := r.med(n, toolPssh, false), r.med(n, toolAnsible, false)
	w("### Targets\n\n| target | measured | |\n|---|---|---|\n")
	if dc > 0 && fc > 0 {
		w("| cold ≤ 2× floor | %s | %s |\n", ratio(dc, fc), verdict(dc <= 2*fc))
	}
	if dc > 0 && pc > 0 {
		w("| cold ≈ 0.3× pssh or better | %s | %s |\n", ratio(dc, pc), verdict(dc <= 0.3*pc))
	}
	if dc > 0 && ac > 0 {
		w("| cold ≈ 0.1× Ansible or better | %s | %s |\n", ratio(dc, ac), verdict(dc <= 0.1*ac))
	}
	if dw > 0 && fw > 0 {
		w("| warm ≤ 4× warm floor | %s | %s |\n", ratio(dw, fw), verdict(dw <= 4*fw))
	}
	if dw > 0 && pc > 0 {
		w("| warm ≤ 0.1× pssh | %s | %s |\n", ratio(dw, pc), verdict(dw <= 0.1*pc))
	}
	if s := r.sup; s != nil {
		w("| supervision: 1 SSH exec per host per poll | %.2f | %s |\n", s.ExecsPerPoll, verdict(s.ExecsPerPoll <= 1.05))
		w("| supervision: 0 history events per host per quiet minute | %.2f | %s |\n", s.EventsPerHostMinute, verdict(s.EventsPerHostMinute == 0))
		limit := (s.Interval + supCheck + time.Second).Seconds()
		w("| restart p95 ≤ interval + start_check_secs + 1 s = %.0f s | %.1f s | %s |\n", limit, s.P95, verdict(s.Restarted == s.Killed && s.P95 <= limit))
	}
	w("\nThe issue's reference (200 hosts, `true`): floor %.1f s cold, %.2f s warm; pssh -p 200 %.1f s; pdsh -f 200 %.1f s; Ansible %.1f s.\n\n",
		refFloorCold, refFloorWarm, refPssh, refPdsh, refAnsible)

	if len(r.settings.scale) > 1 {
		w("### Scaling (cold / warm, median of %d run(s) at sizes other than %d)\n\n", r.settings.scaleRuns, n)
		w("| hosts |")
		for _, tool := range r.settings.tools {
			w(" %s |", tool)
		}
		w("\n|---|")
		for range r.settings.tools {
			w("---|")
		}
		w("\n")
		for _, size := range r.settings.scale {
			w("| %d |", size)
			for _, tool := range r.settings.tools {
				w(" %s / %s |", secs(r.med(size, tool, false)), secs(r.med(size, tool, true)))
			}
			w("\n")
		}
		w("\n")
	}
	if r.memPerHost > 0 {
		mib := r.memPerHost / (1 << 20)
		w("Memory: %.1f MiB per host (sshd listener %.1f MiB, plus its pooled session and the worker's share); with %.1f GiB available, about %d hosts fit on this machine. Starting %d hosts took %s.\n\n",
			mib, r.memListener/(1<<20), float64(r.availBefore)/(1<<30), int(float64(r.availBefore)/r.memPerHost), r.settings.maxHosts(), r.bedStart.Round(time.Second))
	}

	if d := r.drover; d.Cold.Total > 0 {
		w("### Where drover's time goes (%d hosts, medians)\n\n| phase | cold | warm |\n|---|---|---|\n", n)
		row := func(name string, f func(droverRun) float64) {
			w("| %s | %.3f s | %.3f s |\n", name, f(d.Cold), f(d.Warm))
		}
		row("starter exec → task started", func(x droverRun) float64 { return x.ToStart })
		row("task started → first status batch running", func(x droverRun) float64 { return x.FirstActivity })
		row("longest status batch", func(x droverRun) float64 { return x.Activity })
		row("task started → task closed", func(x droverRun) float64 { return x.Workflow })
		row("task closed → starter exit", func(x droverRun) float64 { return x.Fetch })
		row("total", func(x droverRun) float64 { return x.Total })
		if m := r.sizes[n][toolFloor]; m != nil {
			w("| for comparison: the floor running drover's status probe (200 ms CPU window included) | | %.3f s |\n", median(m.richWarm))
		}
		w("| SSH handshakes / execs | %d / %d | %d / %d |\n", d.Cold.Handshakes, d.Cold.Execs, d.Warm.Handshakes, d.Warm.Execs)
		w("| task history events / status batches | %d / %d | %d / %d |\n\n", d.Cold.Events, d.Cold.Batches, d.Warm.Events, d.Warm.Batches)
		w("The worker's CPU profile of the first cold and warm op is `bench/results/drover-cpu.pprof` (`go tool pprof -top bench/results/drover-cpu.pprof`).\n\n")
	}

	r.tailMarkdown(&b)
	return b.String()
}

// tailMarkdown is the supervision table and the settings line.
func (r *report) tailMarkdown(b *strings.Builder) {
	w := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	n, runs := r.settings.hosts, r.settings.runs
	if r.supErr != nil {
		w("Supervision cost: not measured, the run failed: %v\n\n", r.supErr)
	}
	if s := r.sup; s != nil {
		w("### Supervision cost (%d hosts × %d managed processes, %s interval, %s quiet)\n\n", s.Hosts, s.Procs, s.Interval, s.Quiet.Round(time.Second))
		w("| measure | value | target |\n|---|---|---|\n")
		w("| SSH execs per host per poll | %.2f | 1 |\n", s.ExecsPerPoll)
		w("| history events per host per quiet minute | %.2f | 0 |\n", s.EventsPerHostMinute)
		w("| worker CPU seconds per 1,000 host-polls | %.2f | |\n", s.CPUPer1000Polls)
		w("| worker RSS (in-process worker, bench process) | %.0f MiB | |\n", s.RSSMiB)
		limit := (s.Interval + supCheck + time.Second).Seconds()
		w("| killed 10%% (%d): restarted | %d | all |\n", s.Killed, s.Restarted)
		w("| kill → process_restart_success p50 / p95 / max | %.1f / %.1f / %.1f s | p95 ≤ %.0f s |\n", s.P50, s.P95, s.Max, limit)
		w("| restarts of processes not killed | %d | 0 |\n\n", s.UnexpectedRestarts)
	}
	w("Settings: BENCH_HOSTS=%d BENCH_RUNS=%d BENCH_SCALE=%s BENCH_SCALE_RUNS=%d; pssh -p and pdsh -f = max(50, hosts), Ansible forks %d with pipelining. The whole bench took %s.\n",
		n, runs, joinInts(r.settings.scale), r.settings.scaleRuns, r.settings.forks, r.took.Round(time.Second))
}

func toolLabel(tool string, s settings) string {
	switch tool {
	case toolDrover:
		return "drover (`starter api operate_process --wait`, op_type 2)"
	case toolFloor:
		return "floor (bare x/crypto/ssh fan-out)"
	case toolPssh:
		return "pssh (`parallel-ssh -p N`)"
	case toolPdsh:
		return "pdsh (`pdsh -R ssh -f N`)"
	case toolAnsible:
		return fmt.Sprintf("Ansible (`ansible -m shell`, pipelining, forks %d)", s.forks)
	}
	return tool
}

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ",")
}

// plot draws hosts against seconds, one line per tool and mode.
func (r *report) plot(path string) error {
	p := plot.New()
	p.Title.Text = "Status of one process per host (median, log scale)"
	p.X.Label.Text = "hosts"
	p.Y.Label.Text = "seconds"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	i := 0
	for _, tool := range r.settings.tools {
		for _, warm := range []bool{false, true} {
			var pts plotter.XYs
			for _, size := range r.settings.scale {
				if v := r.med(size, tool, warm); v > 0 {
					pts = append(pts, plotter.XY{X: float64(size), Y: v})
				}
			}
			if len(pts) == 0 {
				continue
			}
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			l.Color = plotutil.Color(slices.Index(allTools, tool))
			s.Color = l.Color
			s.Shape = plotutil.Shape(i)
			name := tool + " cold"
			if warm {
				name = tool + " warm"
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(l, s)
			p.Legend.Add(name, l, s)
			i++
		}
	}
	p.Legend.ThumbnailWidth = 0.4 * vg.Inch
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// describeMachine names what the numbers were measured on, and the engine
// when it is a cluster.
func describeMachine(s settings) []string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	out := []string{cpu, fmt.Sprintf("%d cores", runtime.NumCPU()),
		fmt.Sprintf("%.1f GiB RAM", float64(memTotal())/(1<<30)),
		"Linux " + strings.TrimSpace(string(kernel)), runtime.Version()}
	if v, err := exec.Command("ssh", "-V").CombinedOutput(); err == nil {
		out = append(out, strings.TrimSpace(strings.SplitN(string(v), ",", 2)[0]))
	}
	if s.engine != "" {
		out = append(out, "drover's engine a "+s.engine)
	}
	return out
}

func meminfo(key string) int64 {
	data, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key+":" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func memAvailable() int64 { return meminfo("MemAvailable") }
func memTotal() int64     { return meminfo("MemTotal") }
