package testbed

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-sh/drover/transport/psenc"
)

// The Windows the double emulates. Commands reach it as WinRM command
// lines:
//
//   - `powershell ... -EncodedCommand B64`: the script is decoded and must be
//     one of drover's own, run with its arguments (psenc.Invocation), and
//     recognised by its name: probe, control or signal.
//   - `cmd /c LINE`: LINE is run as below.
//
// Control commands, health and version commands, and the .bat/.ps1 files a
// test writes with WriteFile are run in a small line language, one
// statement per line (a command line is one statement):
//
//	spawn EXE PIDFILE [cpu=SHARE] [mem=BYTES]  start a process, write its pid
//	stop PIDFILE                               end the process the pid file names
//	echo TEXT                                  print TEXT
//	sleep SECONDS                              wait (a Signal ends it)
//	exit N                                     end with exit code N
//	rem ..., :: ..., # ..., @echo off          comments
//	PATH [ARGS]                                run a .bat, .cmd or .ps1 file
//
// %1..%9 (bat) and $args[0]..$args[8] (ps1) in a file are its arguments;
// relative paths are relative to the working directory (setup_path). An
// unknown statement prints cmd.exe's or PowerShell's "not recognized" error
// and sets the exit code to 1, as they do.
type windows struct {
	user string
	cpus int
	mem  uint64
	boot time.Time
	tz   string

	mu      sync.Mutex
	files   map[string]string // by lower-cased normalized path
	procs   map[int]*WinProcess
	nextPid int
}

// WinProcess is one emulated process.
type WinProcess struct {
	Pid         int
	Exe         string // ExecutablePath
	CommandLine string
	Created     time.Time
	CPUShare    float64 // of one logical processor
	WorkingSet  uint64
	Threads     int
}

func newWindows(user string) *windows {
	return &windows{user: user, cpus: 4, mem: 16 << 30, boot: time.Now().Add(-time.Hour).Truncate(time.Microsecond),
		tz: "+00:00", files: map[string]string{}, procs: map[int]*WinProcess{}, nextPid: 4000}
}

// dotnetTicks is DateTime.Ticks of t in UTC: 100 ns since 0001-01-01.
func dotnetTicks(t time.Time) int64 { return t.UnixNano()/100 + 621355968000000000 }

// cpuTicks is the process's TotalProcessorTime in 100 ns units by now.
func (p *WinProcess) cpuTicks(now time.Time) int64 {
	return int64(p.CPUShare * float64(now.Sub(p.Created)) / 100)
}

func winKey(p string) string { return strings.ToLower(strings.ReplaceAll(p, "/", `\`)) }

func isAbs(p string) bool {
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/')
}

func joinWin(dir, p string) string {
	if isAbs(p) || dir == "" {
		return p
	}
	return strings.TrimRight(dir, `\/`) + `\` + p
}

// WriteFile puts a file on the emulated host.
func (h *WinHost) WriteFile(p, content string) {
	h.emu.mu.Lock()
	defer h.emu.mu.Unlock()
	h.emu.files[winKey(p)] = content
}

// ReadFile returns a file of the emulated host.
func (h *WinHost) ReadFile(p string) (string, bool) {
	h.emu.mu.Lock()
	defer h.emu.mu.Unlock()
	s, ok := h.emu.files[winKey(p)]
	return s, ok
}

// Processes lists the emulated processes by pid.
func (h *WinHost) Processes() []WinProcess {
	h.emu.mu.Lock()
	defer h.emu.mu.Unlock()
	var out []WinProcess
	for _, p := range h.emu.procs {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pid < out[j].Pid })
	return out
}

// Spawn starts a process as the line language's spawn does, and returns
// its pid.
func (h *WinHost) Spawn(exe, pidFile string) int {
	h.emu.spawn(exe, pidFile, nil)
	return h.PidIn(pidFile)
}

// KillProcess ends a process from outside drover, as a crash would.
func (h *WinHost) KillProcess(pid int) bool {
	h.emu.mu.Lock()
	defer h.emu.mu.Unlock()
	_, ok := h.emu.procs[pid]
	delete(h.emu.procs, pid)
	return ok
}

// PidIn is the live pid a pid file names, or 0.
func (h *WinHost) PidIn(pidFile string) int {
	h.emu.mu.Lock()
	defer h.emu.mu.Unlock()
	pid := h.emu.pidIn(pidFile)
	if h.emu.procs[pid] == nil {
		return 0
	}
	return pid
}

func (w *windows) pidIn(pidFile string) int {
	s, ok := w.files[winKey(pidFile)]
	if !ok {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(s))
	return pid
}

// run executes one WinRM command line.
func (w *windows) run(line string, cancel <-chan struct{}) (string, string, int) {
	f := strings.Fields(line)
	switch {
	case len(f) >= 2 && strings.EqualFold(f[0], "cmd") && strings.EqualFold(f[1], "/c"):
		rest := strings.TrimSpace(line[strings.Index(strings.ToLower(line), "/c")+2:])
		return w.exec(rest, `C:\Users\`+w.user, "bat", cancel, 0)
	case len(f) >= 2 && strings.HasPrefix(strings.ToLower(f[0]), "powershell") && strings.EqualFold(f[len(f)-2], "-EncodedCommand"):
		script, err := psenc.Decode(f[len(f)-1])
		if err == nil {
			script, err = psenc.Expand(script)
		}
		if err != nil {
			return "", "Cannot process the command because the value specified with -EncodedCommand is not properly encoded.\r\n", 1
		}
		return w.powershell(script, cancel)
	}
	return "", fmt.Sprintf("'%s' is not recognized as an internal or external command,\r\noperable program or batch file.\r\n", firstWord(line)), 1
}

func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

// powershell runs one of drover's scripts by its name and arguments, as
// its param block reads them (activities/scripts/*.ps1).
func (w *windows) powershell(script string, cancel <-chan struct{}) (string, string, int) {
	name, _, args, ok := psenc.ParseInvocation(script)
	if !ok {
		return "", "the test double runs only drover's own PowerShell scripts, with their arguments\r\n", 1
	}
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	num := func(i int) int {
		n, _ := strconv.Atoi(arg(i))
		return n
	}
	switch name {
	case "probe":
		p := winProbeParams{WindowMS: num(0)}
		if len(args) > 2 {
			p.Files = args[2:]
		}
		if arg(1) != "" {
			if err := json.Unmarshal([]byte(arg(1)), &p.Checks); err != nil {
				return "", "ConvertFrom-Json: " + err.Error(), 1
			}
		}
		return w.probe(p, cancel), "", 0
	case "control":
		return w.control(winControlParams{Setup: arg(0), Shell: arg(1), Cmd: arg(2), TimeoutS: num(3)}, cancel), "", 0
	case "signal":
		start, _ := strconv.ParseInt(arg(1), 10, 64)
		w.signal(winSignalParams{Pid: num(0), Start: start, Force: arg(2) == "1", WaitMS: num(3)})
		return "", "", 0
	}
	return "", "unknown drover script " + name + "\r\n", 1
}

// The parameters of drover's scripts; a probe's checks are JSON.
type winProbeParams struct {
	Files    []string
	WindowMS int
	Checks   []winCheck
}

type winCheck struct {
	Tag   string `json:"tag"`
	Kind  string `json:"kind"` // version, health, md5
	Setup string `json:"setup"`
	Shell string `json:"shell"`
	Cmd   string `json:"cmd"`
	Path  string `json:"path"`
}

type winControlParams struct {
	Setup, Shell, Cmd string
	TimeoutS          int
}

type winSignalParams struct {
	Pid    int
	Start  int64
	Force  bool
	WaitMS int
}

func (w *windows) probe(p winProbeParams, cancel <-chan struct{}) string {
	var b strings.Builder
	now := time.Now()
	fmt.Fprintf(&b, "H\t%d\t%d\t%d\t%d\t%s\t%s\r\n", w.cpus, w.mem, dotnetTicks(w.boot), dotnetTicks(now), w.tz, w.user)
	w.mu.Lock()
	pids := make([]int, len(p.Files))
	for i, f := range p.Files {
		_, found := w.files[winKey(f)]
		pid := w.pidIn(f)
		pids[i] = pid
		pr := w.procs[pid]
		if pr == nil || pid == 0 {
			fmt.Fprintf(&b, "P\t%d\t%d\t%d\t0\r\n", i, b2i(found), pid)
			continue
		}
		cpu := pr.cpuTicks(now)
		name := strings.TrimSuffix(path.Base(strings.ReplaceAll(pr.Exe, `\`, "/")), ".exe")
		fmt.Fprintf(&b, "P\t%d\t1\t%d\t1\t%d\t%d\t%d\t%d\t%d\t%s\r\n", i, pid, dotnetTicks(pr.Created), cpu*3/4, cpu-cpu*3/4, pr.WorkingSet, pr.Threads, name)
		fmt.Fprintf(&b, "X\t%d\t%s\r\n", i, pr.Exe)
		fmt.Fprintf(&b, "C\t%d\t%s\r\n", i, pr.CommandLine)
	}
	w.mu.Unlock()
	w1 := dotnetTicks(now)
	w2 := w1
	if p.WindowMS > 0 {
		select {
		case <-time.After(time.Duration(p.WindowMS) * time.Millisecond):
		case <-cancel:
		}
		later := time.Now()
		w2 = dotnetTicks(later)
		w.mu.Lock()
		for i, pid := range pids {
			if pr := w.procs[pid]; pr != nil && pid != 0 {
				fmt.Fprintf(&b, "Q\t%d\t%d\r\n", i, pr.cpuTicks(later))
			}
		}
		w.mu.Unlock()
	}
	fmt.Fprintf(&b, "T\t%d\t%d\r\n", w1, w2)
	for _, c := range p.Checks {
		switch c.Kind {
		case "md5":
			w.mu.Lock()
			s, ok := w.files[winKey(c.Path)]
			w.mu.Unlock()
			if ok {
				sum := md5.Sum([]byte(s))
				fmt.Fprintf(&b, "%s%s\r\n", c.Tag, hex.EncodeToString(sum[:]))
			} else {
				fmt.Fprintf(&b, "%s\r\n", c.Tag)
			}
		case "version":
			out, _, _ := w.exec(c.Cmd, c.Setup, c.Shell, cancel, 0)
			first, _, _ := strings.Cut(strings.ReplaceAll(out, "\r", ""), "\n")
			fmt.Fprintf(&b, "%s%s\r\n", c.Tag, first)
		case "health":
			_, _, rc := w.exec(c.Cmd, c.Setup, c.Shell, cancel, 0)
			fmt.Fprintf(&b, "%s%d\r\n", c.Tag, rc)
		}
	}
	return b.String()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// dirExists reports whether any file lives under dir.
func (w *windows) dirExists(dir string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	prefix := strings.TrimRight(winKey(dir), `\`) + `\`
	for k := range w.files {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func (w *windows) control(p winControlParams, cancel <-chan struct{}) string {
	if !w.dirExists(p.Setup) {
		// As drover's script answers: the trailer alone says why.
		return "__drover_rc__ rc=97 timeout=0 setup=missing\r\n"
	}
	stop := make(chan struct{})
	type result struct {
		out string
		rc  int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, rc := w.exec(p.Cmd, p.Setup, p.Shell, stop, 0)
		done <- result{out + errOut, rc}
	}()
	timeout := time.Duration(max(p.TimeoutS, 1)) * time.Second
	var r result
	timedOut := 0
	select {
	case r = <-done:
	case <-time.After(timeout):
		close(stop)
		r = <-done
		r.rc, timedOut = 1, 1
	case <-cancel:
		close(stop)
		r = <-done
	}
	out := r.out
	if len(out) > 4096 {
		out = out[:4096]
	}
	return fmt.Sprintf("%s\r\n__drover_rc__ rc=%d timeout=%d\r\n", out, r.rc, timedOut)
}

func (w *windows) signal(p winSignalParams) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pr := w.procs[p.Pid]
	// The creation time guards against a reused pid, as the real script's
	// does: ticks since the boot's whole second.
	boot := dotnetTicks(w.boot)
	boot -= boot % 10_000_000
	if pr == nil || dotnetTicks(pr.Created)-boot != p.Start {
		return
	}
	delete(w.procs, p.Pid)
}

var reArg = regexp.MustCompile(`%[1-9]|\$args\[[0-8]\]`)

// exec runs statements of the line language in dir; depth bounds nested
// script calls.
func (w *windows) exec(text, dir, shell string, cancel <-chan struct{}, depth int) (string, string, int) {
	var out, errOut strings.Builder
	rc := 0
	for _, line := range strings.Split(strings.ReplaceAll(text, "\r", ""), "\n") {
		words := splitWords(line, shell == "ps1")
		if len(words) > 0 && words[0] == "&" {
			words = words[1:] // PowerShell's call operator
		}
		if len(words) == 0 {
			continue
		}
		verb := strings.ToLower(words[0])
		args := words[1:]
		switch {
		case verb == "rem" || verb == "::" || strings.HasPrefix(verb, "#") || strings.HasPrefix(verb, "@echo"):
		case verb == "echo":
			// cmd.exe's echo prints the rest of the line as it is.
			_, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
			out.WriteString(rest + "\r\n")
			rc = 0
		case verb == "exit":
			if len(args) > 0 && strings.EqualFold(args[0], "/b") {
				args = args[1:]
			}
			n := 0
			if len(args) > 0 {
				n, _ = strconv.Atoi(args[0])
			}
			return out.String(), errOut.String(), n
		case verb == "sleep" && len(args) == 1:
			secs, _ := strconv.ParseFloat(args[0], 64)
			select {
			case <-time.After(time.Duration(secs * float64(time.Second))):
			case <-cancel:
				return out.String(), errOut.String(), 1
			}
			rc = 0
		case verb == "spawn" && len(args) >= 2:
			w.spawn(joinWin(dir, args[0]), joinWin(dir, args[1]), args[2:])
			rc = 0
		case verb == "stop" && len(args) == 1:
			w.mu.Lock()
			delete(w.procs, w.pidIn(joinWin(dir, args[0])))
			w.mu.Unlock()
			rc = 0
		default:
			p := joinWin(dir, words[0])
			w.mu.Lock()
			body, ok := w.files[winKey(p)]
			w.mu.Unlock()
			ext := strings.ToLower(path.Ext(strings.ReplaceAll(p, `\`, "/")))
			if ok && depth < 8 && (ext == ".bat" || ext == ".cmd" || ext == ".ps1") {
				body = reArg.ReplaceAllStringFunc(body, func(m string) string {
					i := int(m[len(m)-1]-'0') - 1
					if strings.HasPrefix(m, "$") {
						i = int(m[len(m)-2] - '0')
					}
					if i < len(args) {
						return args[i]
					}
					return ""
				})
				o, e, code := w.exec(body, dir, strings.TrimPrefix(ext, "."), cancel, depth+1)
				out.WriteString(o)
				errOut.WriteString(e)
				rc = code
				continue
			}
			if shell == "ps1" {
				fmt.Fprintf(&errOut, "%s : The term '%s' is not recognized as the name of a cmdlet, function, script file, or operable program.\r\n", words[0], words[0])
			} else {
				fmt.Fprintf(&errOut, "'%s' is not recognized as an internal or external command,\r\noperable program or batch file.\r\n", words[0])
			}
			rc = 1
		}
	}
	return out.String(), errOut.String(), rc
}

// spawn starts an emulated process and writes its pid file.
func (w *windows) spawn(exe, pidFile string, opts []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nextPid += 4 // Windows pids are multiples of 4
	p := &WinProcess{Pid: w.nextPid, Exe: exe, CommandLine: `"` + exe + `"`, Created: time.Now(),
		CPUShare: 0.02, WorkingSet: 24 << 20, Threads: 6}
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "cpu":
			p.CPUShare, _ = strconv.ParseFloat(v, 64)
		case "mem":
			p.WorkingSet, _ = strconv.ParseUint(v, 10, 64)
		}
	}
	w.procs[p.Pid] = p
	w.files[winKey(pidFile)] = strconv.Itoa(p.Pid) + "\r\n"
}

// splitWords splits a line into words; "double" quotes group, and for
// PowerShell 'single' quotes too.
func splitWords(s string, single bool) []string {
	var words []string
	var cur strings.Builder
	in := rune(0)
	has := false
	for _, r := range s {
		switch {
		case in != 0 && r == in:
			in = 0
		case in == 0 && (r == '"' || single && r == '\''):
			in, has = r, true
		case in == 0 && (r == ' ' || r == '\t'):
			if has {
				words = append(words, cur.String())
				cur.Reset()
				has = false
			}
		default:
			cur.WriteRune(r)
			has = true
		}
	}
	if has {
		words = append(words, cur.String())
	}
	return words
}
