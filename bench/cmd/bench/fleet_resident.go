package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// residentCost is what a resident agent costs the host it runs on: monit
// checking the same number of processes by their pid files, measured on
// this machine in the same run as drover's polls.
type residentCost struct {
	MsPerCycle float64 // CPU per check cycle
	Cycles     int
	RSSMiB     float64
	Err        string // why it was not measured
}

// residentFloor runs monit in the foreground, checking procs copies of
// sleep every second for window, and reads its CPU from schedstat
// (nanoseconds: a cycle costs well under the 10 ms a clock tick counts).
// It runs beside the test bed's sshd hosts, so its /proc holds about as
// many processes as a busy host's.
func residentFloor(ctx context.Context, dir string, procs int, window time.Duration) residentCost {
	monit, err := exec.LookPath("monit")
	if err != nil {
		return residentCost{Err: "monit is not installed (make bench-deps)"}
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return residentCost{Err: err.Error()}
	}
	dir = filepath.Join(dir, "resident")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return residentCost{Err: err.Error()}
	}
	var rc strings.Builder
	fmt.Fprintf(&rc, "set daemon 1\nset logfile %s/monit.log\nset pidfile %s/monit.pid\nset idfile %s/monit.id\nset statefile %s/monit.state\n", dir, dir, dir, dir)
	for p := 0; p < procs; p++ {
		c := exec.Command(sleep, "86400")
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			return residentCost{Err: err.Error()}
		}
		defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
		pidFile := filepath.Join(dir, fmt.Sprintf("svc%d.pid", p))
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(c.Process.Pid)), 0o644); err != nil {
			return residentCost{Err: err.Error()}
		}
		fmt.Fprintf(&rc, "check process svc%d with pidfile %q\n", p, pidFile)
	}
	rcPath := filepath.Join(dir, "monitrc")
	if err := os.WriteFile(rcPath, []byte(rc.String()), 0o600); err != nil {
		return residentCost{Err: err.Error()}
	}
	m := exec.Command(monit, "-I", "-c", rcPath)
	m.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.Start(); err != nil {
		return residentCost{Err: err.Error()}
	}
	defer func() { _ = m.Process.Kill(); _ = m.Wait() }()
	// Its first cycles read the state file and start up: not counted.
	if err := sleepCtx(ctx, 3*time.Second); err != nil {
		return residentCost{Err: err.Error()}
	}
	ns0, err := schedNs(m.Process.Pid)
	if err != nil {
		return residentCost{Err: "monit: " + err.Error()}
	}
	t0 := time.Now()
	if err := sleepCtx(ctx, window); err != nil {
		return residentCost{Err: err.Error()}
	}
	ns1, err := schedNs(m.Process.Pid)
	if err != nil {
		return residentCost{Err: "monit ended early: see " + filepath.Join(dir, "monit.log")}
	}
	out := residentCost{Cycles: int(time.Since(t0) / time.Second), RSSMiB: procRSS(m.Process.Pid)}
	out.MsPerCycle = float64(ns1-ns0) / 1e6 / float64(max(out.Cycles, 1))
	return out
}

// schedNs is a process's CPU time so far, every thread's, in ns.
func schedNs(pid int) (uint64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("process %d is gone", pid)
	}
	var sum uint64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that ended
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			v, _ := strconv.ParseUint(f[0], 10, 64)
			sum += v
		}
	}
	return sum, nil
}
