package main

import (
	"os"
	"strconv"
	"strings"

	"github.com/drover-sh/drover/internal/testbed"
)

// cpuSplit is the CPU seconds the machine spent while an op ran, split
// into the engine's server process, the bench's own process (drover's
// worker runs in it) and everything else: the hosts' sshd and the commands
// they run, and the starter.
type cpuSplit struct {
	Server, Worker, Rest float64
	// Hosts is the part of Rest the hosts' sshd spent, with the commands
	// they ran and reaped: what is left of Rest is the kernel's network
	// work, time the hypervisor took, the starter and the rest of the
	// machine.
	Hosts float64
}

// total is every process's CPU seconds.
func (s cpuSplit) total() float64 { return s.Server + s.Worker + s.Rest }

// cpuMark is one reading of the counters a cpuSplit is the difference of.
type cpuMark struct {
	all, server, self, hosts float64
}

// markCPU reads the machine's, the server's (pid 0: no server process is
// counted apart), this process's and the sshd hosts' CPU seconds.
func markCPU(serverPid int, hosts []*testbed.Host) cpuMark {
	m := cpuMark{all: machineCPU(), self: cpuSeconds(), hosts: hostsCPU(hosts)}
	if serverPid > 0 {
		m.server = procCPU(serverPid, false)
	}
	return m
}

// since is the split from m to now.
func (m cpuMark) since(serverPid int, hosts []*testbed.Host) cpuSplit {
	now := markCPU(serverPid, hosts)
	s := cpuSplit{Server: now.server - m.server, Worker: now.self - m.self}
	s.Rest = max(0, now.all-m.all-s.Server-s.Worker)
	s.Hosts = min(s.Rest, max(0, now.hosts-m.hosts))
	return s
}

// machineCPU is the CPU seconds every core has spent busy since boot.
func machineCPU() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	busy := 0.0
	for i, v := range f[1:] {
		if i == 3 || i == 4 {
			continue
		}
		if i > 7 {
			break
		}
		x, _ := strconv.ParseFloat(v, 64)
		busy += x
	}
	return busy / 100 // USER_HZ
}

// ctlKey names a control op's cold or warm runs.
func ctlKey(op string, warm bool) string {
	if warm {
		return op + " warm"
	}
	return op + " cold"
}

// bedHosts are the test bed's sshd hosts, none without a bed.
func (e *env) bedHosts() []*testbed.Host {
	if e.bed == nil {
		return nil
	}
	return e.bed.Hosts
}
