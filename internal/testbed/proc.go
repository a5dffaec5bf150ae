package testbed

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

type procInfo struct {
	pid, ppid int
	mntNS     string // "mnt:[INODE]", only when asked for
}

// scanProcs lists live processes from /proc; zombies are left out as they
// can no longer be signalled into doing anything.
func scanProcs(withNS bool) []procInfo {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	out := make([]procInfo, 0, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(stat[i+1:])
		if len(fields) < 2 || fields[0][0] == 'Z' || fields[0][0] == 'X' {
			continue
		}
		ppid, _ := strconv.Atoi(string(fields[1]))
		p := procInfo{pid: pid, ppid: ppid}
		if withNS {
			p.mntNS, _ = os.Readlink("/proc/" + name + "/ns/mnt")
		}
		out = append(out, p)
	}
	return out
}

// descendants returns the pids below root, parents before children.
func descendants(root int, procs []procInfo) []int {
	children := map[int][]int{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// killHosts SIGKILLs each running host's sshd, its process tree and every
// process in its mount namespace, then waits for sshd to be reaped. Callers
// hold each host's mutex.
func killHosts(hosts []*Host) error {
	self, _ := os.Readlink("/proc/self/ns/mnt")
	var running []*Host
	namespaces := map[string]bool{}
	for _, h := range hosts {
		if h.cmd == nil {
			continue
		}
		running = append(running, h)
		// An open handle keeps the namespace alive, so its inode number
		// cannot be recycled for another bed's host while we sweep by it.
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/mnt", h.pid))
		if err != nil {
			continue
		}
		defer f.Close()
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
			continue
		}
		// Never sweep the machine's own namespace, should sshd ever share it.
		if ns := fmt.Sprintf("mnt:[%d]", st.Ino); ns != self {
			namespaces[ns] = true
		}
	}
	if len(running) == 0 {
		return nil
	}

	var err error
	deadline := time.Now().Add(15 * time.Second)
	for {
		procs := scanProcs(len(namespaces) > 0)
		victims := map[int]bool{}
		for _, h := range running {
			select {
			case <-h.done:
				// Reaped: its pid may already belong to someone else.
				continue
			default:
			}
			victims[h.pid] = true
			for _, pid := range descendants(h.pid, procs) {
				victims[pid] = true
			}
		}
		for _, p := range procs {
			if p.mntNS != "" && namespaces[p.mntNS] {
				victims[p.pid] = true
			}
		}
		// The listener stays a zombie until reaped, so it is only "gone"
		// once done is closed; liveness of the rest comes from the scan.
		alive := 0
		for pid := range victims {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				alive++
			}
		}
		if alive == 0 && allReaped(running) {
			break
		}
		if time.Now().After(deadline) {
			err = fmt.Errorf("testbed: %d processes survived SIGKILL", alive)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, h := range running {
		select {
		case <-h.done:
		case <-time.After(5 * time.Second):
			if err == nil {
				err = fmt.Errorf("host %s: sshd %d not reaped", h.IP, h.pid)
			}
		}
		h.cmd, h.pid, h.done, h.paused = nil, 0, nil, false
	}
	return err
}

func allReaped(hosts []*Host) bool {
	for _, h := range hosts {
		select {
		case <-h.done:
		default:
			return false
		}
	}
	return true
}
