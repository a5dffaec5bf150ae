package activities

import (
	"strconv"
	"sync"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
)

// knownProc is one live incarnation and what proved it the spec's
// process. A pid and its start time name one process until the host
// reboots, so a probe told them (see probe_pids in scripts/lib_probe.sh)
// need not read its exe and command line again.
type knownProc struct {
	pid                        int
	start                      uint64
	exe, argv0, argv1, cmdline string
}

// provenProc is s as a knownProc when alive (the spec's process, by what
// the probe read of it), else the zero knownProc.
func provenProc(s proc.Sample, alive bool) knownProc {
	if !alive || s.Pid <= 0 || s.StartTicks == 0 {
		return knownProc{}
	}
	return knownProc{pid: s.Pid, start: s.StartTicks, exe: s.Exe, argv0: s.Argv0, argv1: s.Argv1, cmdline: s.Cmdline}
}

// arg is probe_pids' KNOWN for k: "PID STARTTICKS", or "" for none.
func (k knownProc) arg() string {
	if k.pid <= 0 {
		return ""
	}
	return strconv.Itoa(k.pid) + " " + strconv.FormatUint(k.start, 10)
}

// recall completes s, when the probe skipped its exe and command line
// because it is k, with k's.
func (k knownProc) recall(s *proc.Sample) {
	if k.pid > 0 && s.Pid == k.pid && s.StartTicks == k.start && s.Exe == "" && s.Argv0 == "" {
		s.Exe, s.Argv0, s.Argv1, s.Cmdline = k.exe, k.argv0, k.argv1, k.cmdline
	}
}

// procsSeen keeps, per host, account and pid file, the incarnation the
// last probe there proved the spec's process, and the boot it belongs to:
// a status of it then forks no readlink and no tr.
type procsSeen struct {
	mu sync.Mutex
	m  map[string]seenProc
}

type seenProc struct {
	knownProc
	bootTime int64
}

func seenKey(h inventory.Host, account, pidFile string) string {
	return factsKey(h, account) + "\x00" + pidFile
}

// get is the incarnation last proved at key for the boot at bootTime, or
// none.
func (p *procsSeen) get(key string, bootTime int64) knownProc {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.m[key]; ok && s.bootTime == bootTime && bootTime > 0 {
		return s.knownProc
	}
	return knownProc{}
}

// learn keeps what a probe at key proved, or forgets what it no longer
// can.
func (p *procsSeen) learn(key string, bootTime int64, k knownProc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k.pid <= 0 || bootTime <= 0 {
		delete(p.m, key)
		return
	}
	if p.m == nil {
		p.m = map[string]seenProc{}
	}
	p.m[key] = seenProc{knownProc: k, bootTime: bootTime}
}
