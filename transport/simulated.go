package transport

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-sh/drover/inventory"
)

// Simulated answers drover's scripts in-process as a Linux host would: a
// simulation for measuring drover and its engine at fleet sizes that real
// sshd hosts cannot reach on one machine, never a way to manage hosts. An
// inventory entry reaches it only with transport "simulated". Each host
// keeps its files and processes in memory; a control command is read as
// the few shell forms the benchmarks' specs use (see runLine), and every
// other line succeeds doing nothing. Scripts are recognised by name
// (Command.Name) and read their arguments as the real ones do.
type Simulated struct {
	// Latency is added to every command: the round trip and exec a real
	// host would take.
	Latency time.Duration
	boot    time.Time
	bootID  string
	mu      sync.Mutex
	hosts   map[string]*simHost
}

// simHZ and simCPUs describe every simulated host.
const (
	simHZ   = 100
	simCPUs = 2
	simMem  = 4 << 30
	simPage = 4096
)

// NewSimulated is an empty simulated fleet, its hosts booted now.
func NewSimulated(latency time.Duration) *Simulated {
	now := time.Now()
	return &Simulated{Latency: latency, boot: now.Add(-time.Hour), bootID: fmt.Sprintf("simulated-%d", now.UnixNano()),
		hosts: map[string]*simHost{}}
}

// simHost is one simulated host's files and processes.
type simHost struct {
	mu    sync.Mutex
	files map[string]string
	procs map[int]*simProc
	next  int
}

type simProc struct {
	pid   int
	start uint64
	exe   string
	argv  []string
}

var (
	_ Runner    = (*Simulated)(nil)
	_ Connector = (*Simulated)(nil)
)

// Connect has nothing to do: a simulated host is always there.
func (s *Simulated) Connect(context.Context, inventory.Host) error { return nil }

// Run answers cmd as host would.
func (s *Simulated) Run(ctx context.Context, host inventory.Host, cmd Command) (Result, error) {
	if s.Latency > 0 {
		if err := simSleep(ctx, s.Latency); err != nil {
			return Result{}, &Error{Kind: KindTimeout, Host: host.IP, Err: err}
		}
	}
	h := s.host(host)
	var out strings.Builder
	switch cmd.Name {
	case "probe":
		// WINDOW, what is known of the host (seven), then the pairs.
		a := padArgs(cmd.Args, 8)
		s.probe(&out, h, host.User, a[0], a[8:])
	case "status":
		a := padArgs(cmd.Args, 5)
		s.probe(&out, h, host.User, a[0], []string{a[1], ""})
		if a[3] != "" {
			out.WriteString("V\tsimulated\n")
		}
		if a[3] != "" || a[4] != "" {
			out.WriteString("Z\t0\n")
		}
	case "watch":
		s.watch(&out, h, host.User, cmd.Args)
	case "control", "checked_control":
		a := padArgs(cmd.Args, 22)
		if cmd.Name == "checked_control" && a[18] != "" && (a[19] != host.User || !h.guardHolds(a[18], a[10])) {
			out.WriteString("__drover_guard__\n")
			s.probe(&out, h, host.User, "0", []string{a[10], ""})
			break
		}
		h.write(a[0], a[1])
		rc := s.control(h, a[2], a[3])
		wait, checks := a[9], rc == 0 || a[8] == "1"
		if cmd.Name == "checked_control" && a[20] != "" {
			// A restart's start follows its stop in this exec once the
			// stop has ended the process.
			if !checks || !h.guardHolds("none", a[10]) {
				out.WriteString("__drover_alone__\n")
			} else {
				out.WriteString("__drover_then__\n")
				rc = s.control(h, a[2], a[20])
				wait, checks = a[21], rc == 0
			}
		}
		fmt.Fprintf(&out, "\n__drover_rc__ rc=%d timeout=0\n", rc)
		if cmd.Name == "checked_control" && checks {
			if secs, _ := strconv.ParseFloat(wait, 64); secs > 0 {
				if err := simSleep(ctx, time.Duration(secs*float64(time.Second))); err != nil {
					return Result{}, &Error{Kind: KindTimeout, Host: host.IP, Err: err}
				}
			}
			out.WriteString("__drover_check__\n")
			s.probe(&out, h, host.User, "0", []string{a[10], ""})
		}
	case "signal":
		a := padArgs(cmd.Args, 6)
		h.write(a[0], a[1])
		pid, _ := strconv.Atoi(a[2])
		start, _ := strconv.ParseUint(a[3], 10, 64)
		h.kill(pid, start)
	case "marker":
		out.WriteString(h.read(padArgs(cmd.Args, 1)[0]))
	case "end":
		if len(cmd.Args) > 0 {
			h.write(cmd.Args[0]+".cancelled", "")
		}
	case "whoami":
		out.WriteString(host.User + "\n")
	}
	return Result{Stdout: []byte(out.String())}, nil
}

func (s *Simulated) host(h inventory.Host) *simHost {
	key := fmt.Sprintf("%d:%s", h.CloudID, h.IP)
	s.mu.Lock()
	defer s.mu.Unlock()
	sh, ok := s.hosts[key]
	if !ok {
		sh = &simHost{files: map[string]string{}, procs: map[int]*simProc{}, next: 1000}
		s.hosts[key] = sh
	}
	return sh
}

// guardHolds is guard_holds of scripts/lib_probe.sh: "none" when
// pidFile names no process, else "PID STARTTICKS" of the one it names.
func (h *simHost) guardHolds(guard, pidFile string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	pid, _ := strconv.Atoi(strings.TrimSpace(h.files[pidFile]))
	p := h.procs[pid]
	if p == nil {
		return guard == "none"
	}
	return guard == fmt.Sprintf("%d %d", pid, p.start)
}

// ticks is the host's clock in clock ticks since boot.
func (s *Simulated) ticks() uint64 { return uint64(time.Since(s.boot) / (time.Second / simHZ)) }

// probe prints the H line, then each PIDFILE KNOWN pair's P, X and C
// lines, then T: probe.sh's output with a window of 0.
func (s *Simulated) probe(out *strings.Builder, h *simHost, user, _ string, pairs []string) {
	now := time.Now()
	fmt.Fprintf(out, "H\t%d\t%d\t%d\t%d\t%d\tUTC+0000\t%d\t%s\t%s\n", simCPUs, simHZ, simMem, s.boot.Unix(), now.Unix(), simPage, user, s.bootID)
	h.mu.Lock()
	for i := 0; i < len(pairs); i += 2 {
		f := pairs[i]
		content, found := h.files[f]
		pid, _ := strconv.Atoi(strings.TrimSpace(content))
		p := h.procs[pid]
		n := i / 2
		switch {
		case !found:
			fmt.Fprintf(out, "P\t%d\t0\t\t\nX\t%d\t\nC\t%d\t\n", n, n, n)
		case p == nil:
			fmt.Fprintf(out, "P\t%d\t1\t%s\t\nX\t%d\t\nC\t%d\t\n", n, strings.TrimSpace(content), n, n)
		default:
			fmt.Fprintf(out, "P\t%d\t1\t%d\tS 1 %d %d 0 -1 4194560 0 0 0 0 1 1 0 0 20 0 1 0 %d 8192000 200\n", n, pid, pid, pid, p.start)
			fmt.Fprintf(out, "X\t%d\t%s\nC\t%d\t%s\n", n, p.exe, n, strings.Join(p.argv, "\t"))
		}
	}
	h.mu.Unlock()
	t := s.ticks() * simCPUs
	fmt.Fprintf(out, "T\t%d\t%d\n", t, t)
}

// watch answers watch.sh: the probe of its pid files, then every health
// check healthy; config checks say nothing.
func (s *Simulated) watch(out *strings.Builder, h *simHost, user string, args []string) {
	if len(args) < 11 {
		return
	}
	n, _ := strconv.Atoi(args[10])
	rest := args[11:]
	if 2*n > len(rest) {
		n = len(rest) / 2
	}
	s.probe(out, h, user, "0", rest[:2*n])
	for checks := rest[2*n:]; len(checks) >= 5; checks = checks[5:] {
		if checks[0] == "health" {
			fmt.Fprintf(out, "Z\t%s\t0\n", checks[2])
		}
	}
}

// simSteps cuts a control command line into its steps, each with the
// operator after it: ";", "&&", "&" (run in the background) or "" at the
// end. An "&" inside a redirection (2>&1) is not an operator.
func simSteps(line string) (steps, ops []string) {
	start := 0
	for i := 0; i < len(line); i++ {
		op := ""
		switch {
		case strings.HasPrefix(line[i:], "&&"):
			op = "&&"
		case line[i] == ';':
			op = ";"
		case line[i] == '&' && (i == 0 || line[i-1] != '>' && line[i-1] != '<') && (i+1 == len(line) || line[i+1] != '>'):
			op = "&"
		default:
			continue
		}
		steps, ops = append(steps, strings.TrimSpace(line[start:i])), append(ops, op)
		i += len(op) - 1
		start = i + 1
	}
	return append(steps, strings.TrimSpace(line[start:])), append(ops, "")
}

// control runs a control command line in setup and returns its status.
func (s *Simulated) control(h *simHost, setup, line string) int {
	rc, last := 0, 0
	steps, ops := simSteps(line)
	for i, step := range steps {
		if step == "" {
			continue
		}
		if ops[i] == "&" {
			last = h.spawn(setup, step, s.ticks())
			rc = 0
			continue
		}
		rc = h.runLine(setup, step, last)
		if ops[i] == "&&" && rc != 0 {
			return rc
		}
	}
	return rc
}

// runLine runs one foreground step: `echo $! > FILE` notes the last
// background process, `kill [-SIG] $(cat FILE)` ends the process FILE
// names (status 1 when there is none), `rm -f FILE` removes FILE; any
// other step succeeds doing nothing.
func (h *simHost) runLine(setup, step string, last int) int {
	f := strings.Fields(step)
	switch {
	case len(f) == 4 && f[0] == "echo" && f[1] == "$!" && f[2] == ">":
		h.write(simPath(setup, f[3]), strconv.Itoa(last))
	case len(f) >= 3 && f[0] == "kill" && strings.HasPrefix(f[len(f)-2], "$(cat") && strings.HasSuffix(f[len(f)-1], ")"):
		pid, _ := strconv.Atoi(strings.TrimSpace(h.read(simPath(setup, strings.TrimSuffix(f[len(f)-1], ")")))))
		if !h.kill(pid, 0) {
			return 1
		}
	case len(f) >= 2 && f[0] == "rm":
		h.mu.Lock()
		delete(h.files, simPath(setup, f[len(f)-1]))
		h.mu.Unlock()
	}
	return 0
}

// spawn starts the process a background step names (past setsid or
// nohup, before any redirection) and returns its pid.
func (h *simHost) spawn(setup, step string, now uint64) int {
	var argv []string
	for _, w := range strings.Fields(step) {
		if strings.ContainsAny(w, "<>") {
			break
		}
		if len(argv) == 0 && (w == "setsid" || w == "nohup" || w == "exec") {
			continue
		}
		argv = append(argv, w)
	}
	if len(argv) == 0 {
		argv = []string{"sh"}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	h.procs[h.next] = &simProc{pid: h.next, start: now, exe: simPath(setup, argv[0]), argv: argv}
	return h.next
}

// kill ends pid, if it runs and (with start) is that incarnation.
func (h *simHost) kill(pid int, start uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.procs[pid]
	if !ok || start != 0 && p.start != start {
		return false
	}
	delete(h.procs, pid)
	return true
}

func (h *simHost) write(file, content string) {
	if file == "" {
		return
	}
	h.mu.Lock()
	h.files[file] = content
	h.mu.Unlock()
}

func (h *simHost) read(file string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.files[file]
}

// simPath is name as seen from dir.
func simPath(dir, name string) string {
	if path.IsAbs(name) {
		return path.Clean(name)
	}
	return path.Join(dir, name)
}

// padArgs is args, with "" for the ones missing, to n.
func padArgs(args []string, n int) []string {
	for len(args) < n {
		args = append(args, "")
	}
	return args
}

func simSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
