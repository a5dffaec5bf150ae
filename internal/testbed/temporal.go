package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// TemporalOptions configures a dev server started from the pinned CLI binary.
type TemporalOptions struct {
	// Binary is the temporal CLI; default: $DROVER_TEMPORAL_BIN, else bin/temporal
	// at the module root.
	Binary string
	// DBFile persists state across restarts; empty means a fresh file in a temp dir.
	DBFile string
	// Address to listen on; empty picks a free port on 127.0.0.1.
	Address string
	// UIPort enables the web UI on 127.0.0.1:UIPort when non-zero.
	UIPort int
	// SearchAttributes are registered at start, name -> type (Keyword, Int, ...).
	SearchAttributes map[string]string
	// LogFile receives the server's output; empty discards it.
	LogFile string
	// MetricsPort serves the server's Prometheus metrics on
	// 127.0.0.1:MetricsPort/metrics when non-zero.
	MetricsPort int
	// SQLitePragmas are passed to the server's SQLite store ("NAME=VALUE").
	SQLitePragmas []string
}

// Temporal is a running dev server process that this process owns.
type Temporal struct {
	Address string
	opts    TemporalOptions
	cmd     *exec.Cmd
	done    chan struct{}
}

// StartTemporal starts `temporal server start-dev` and waits until it answers.
func StartTemporal(opts TemporalOptions) (*Temporal, error) {
	if opts.Binary == "" {
		opts.Binary = TemporalBinary()
	}
	if _, err := os.Stat(opts.Binary); err != nil {
		return nil, fmt.Errorf("temporal CLI not found at %s (run `make bin/temporal`): %w", opts.Binary, err)
	}
	if opts.DBFile == "" {
		dir, err := os.MkdirTemp("", "drover-temporal-")
		if err != nil {
			return nil, err
		}
		opts.DBFile = filepath.Join(dir, "temporal.db")
	}
	if opts.Address == "" {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		opts.Address = "127.0.0.1:" + strconv.Itoa(port)
	}
	t := &Temporal{Address: opts.Address, opts: opts}
	return t, t.Start()
}

// errExited is a server that exited before it was ready.
var errExited = errors.New("temporal dev server exited during start-up")

// Start (re)starts the server process with the same options and db file.
// A server that exits during start-up is started again, up to twice: its
// internal ports are picked afresh at each start, and on a busy machine
// another test's process can take one first.
func (t *Temporal) Start() error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = t.start(); !errors.Is(err, errExited) {
			return err
		}
	}
	return err
}

func (t *Temporal) start() error {
	host, port, err := net.SplitHostPort(t.opts.Address)
	if err != nil {
		return err
	}
	args := []string{"server", "start-dev", "--ip", host, "--port", port,
		"--db-filename", t.opts.DBFile, "--log-level", "warn",
		"--dynamic-config-value", "frontend.enableServerVersionCheck=false",
		// Ops on many hosts need more than the dev server's default burst.
		"--dynamic-config-value", "frontend.namespaceRPS=20000",
		"--dynamic-config-value", "frontend.rps=20000",
	}
	for _, v := range DevServerFleetConfig {
		args = append(args, "--dynamic-config-value", v)
	}
	if t.opts.UIPort != 0 {
		args = append(args, "--ui-ip", "127.0.0.1", "--ui-port", strconv.Itoa(t.opts.UIPort))
	} else {
		args = append(args, "--headless")
	}
	for _, p := range t.opts.SQLitePragmas {
		args = append(args, "--sqlite-pragma", p)
	}
	if t.opts.MetricsPort != 0 {
		args = append(args, "--metrics-port", strconv.Itoa(t.opts.MetricsPort))
	}
	for name, typ := range t.opts.SearchAttributes {
		args = append(args, "--search-attribute", name+"="+typ)
	}
	cmd := exec.Command(t.opts.Binary, args...)
	cmd.Env = append(os.Environ(), "GOGC="+DevServerGOGC)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if t.opts.LogFile != "" {
		f, err := os.OpenFile(t.opts.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start temporal dev server: %w", err)
	}
	t.cmd = cmd
	t.done = make(chan struct{})
	go func() { _ = cmd.Wait(); close(t.done) }()
	return t.waitReady(60 * time.Second)
}

func (t *Temporal) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := client.Dial(client.Options{HostPort: t.Address, Logger: quietLogger{}})
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
			if err == nil {
				_, err = c.WorkflowService().DescribeNamespace(ctx, describeDefault())
			}
			cancel()
			c.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-t.done:
			return errExited
		default:
		}
		if time.Now().After(deadline) {
			_ = t.Stop()
			return fmt.Errorf("temporal dev server at %s not ready after %s: %v", t.Address, limit, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop interrupts the server (it flushes SQLite on SIGINT) and kills it if it
// has not exited within 10 s.
func (t *Temporal) Stop() error {
	if t.cmd == nil || t.cmd.Process == nil {
		return nil
	}
	stopGroup(t.cmd, t.done, syscall.SIGINT, 10*time.Second)
	return nil
}

// Pid is the server's process id.
func (t *Temporal) Pid() int { return t.cmd.Process.Pid }

// NewTemporal starts a dev server for a test and stops it in cleanup.
func NewTemporal(tb testing.TB, opts TemporalOptions) *Temporal {
	tb.Helper()
	srv, err := StartTemporal(opts)
	if err != nil {
		tb.Fatalf("temporal dev server: %v", err)
	}
	tb.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// TemporalBinary is where the pinned temporal CLI lives.
func TemporalBinary() string {
	if p := os.Getenv("DROVER_TEMPORAL_BIN"); p != "" {
		return p
	}
	return filepath.Join(ModuleRoot(), "bin", "temporal")
}

// ModuleRoot finds the directory holding go.mod, from the working directory up.
func ModuleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

// FreePort is a TCP port on 127.0.0.1 nothing listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// DevServerFleetConfig is the dev server's dynamic config for a fleet, as
// docs/operating.md gives it to operators (a test holds the two alike).
var DevServerFleetConfig = []string{
	// A host op's activity then starts from its host workflow's task,
	// skipping the task queue (drover's workers ask for it).
	"system.enableActivityEagerExecution=true",
	// Drover's search attributes exist from the server's start; the dev
	// server otherwise reads them from its database at every visibility
	// write and every start request.
	"system.forceSearchAttributesCacheRefreshOnRead=false",
	// One matching process: partitions only spread the pollers.
	"matching.numTaskqueueReadPartitions=1",
	"matching.numTaskqueueWritePartitions=1",
	// A poll answered after the SDK's 70 s deadline loses its task: the
	// server has started it, and it waits out its heartbeat timeout.
	// Empty polls end at 20 s, not 60, so a task handed to a poll late
	// still has 50 s to reach the worker.
	`matching.longPollExpirationInterval="20s"`,
	// The dev server lowers the mutable-state cache to 8,096 workflows
	// (two entries a host), so an op on 10,000 hosts reloaded every
	// host's state from its database; and it has one history shard,
	// whose 512 KB events cache holds the recent events of a few hundred
	// workflows.
	"history.hostLevelCacheMaxSize=128000",
	"history.eventsCacheMaxSizeBytes=67108864",
}

// DevServerGOGC is the dev server's GOGC: its heap may grow to five
// times what is live before it collects, not twice.
const DevServerGOGC = "400"
