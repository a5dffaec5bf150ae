package testbed

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// child is a process this one started and waits for.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startChild(cmd *exec.Cmd, logFile string) (*child, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	return c, nil
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends sig to the child's process group, and SIGKILL if it has not
// exited within limit.
func (c *child) stop(sig syscall.Signal, limit time.Duration) {
	if c == nil {
		return
	}
	stopGroup(c.cmd, c.done, sig, limit)
}

// stopGroup sends sig to the process group cmd leads, and SIGKILL if it
// has not exited (done closed) within limit; nothing once it has exited.
func stopGroup(cmd *exec.Cmd, done <-chan struct{}, sig syscall.Signal, limit time.Duration) {
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-done:
	case <-time.After(limit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}
