package cli

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/transport"
	"github.com/drover-sh/drover/workflows"
)

// Dial connects to Temporal with the configured address and namespace.
func Dial(cfg config.Config, logger *slog.Logger) (client.Client, error) {
	opts, err := cfg.ClientOptions()
	if err != nil {
		return nil, err
	}
	opts.Logger = tlog.NewStructuredLogger(logger)
	c, err := client.Dial(opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	return c, nil
}

// Worker is a running drover worker: its client, SSH pool and Temporal worker.
type Worker struct {
	Client client.Client
	SSH    *transport.SSH
	w      worker.Worker
	once   sync.Once
}

// StartWorker loads the inventory, opens the SSH pool and starts polling.
func StartWorker(cfg config.Config, logger *slog.Logger) (*Worker, error) {
	inv, err := inventory.Load(cfg.Inventory)
	if err != nil {
		return nil, err
	}
	ssh, err := transport.NewSSH(transport.SSHOptions{KnownHostsPath: inv.KnownHosts, MaxSessionsPerHost: cfg.MaxSessionsPerHost,
		TrustOnFirstUse: cfg.SSHTOFU, OnTrust: func(addr, fingerprint string) {
			logger.Warn("host key trusted on first use", "host", addr, "key", fingerprint, "known_hosts", inv.KnownHosts)
		}})
	if err != nil {
		return nil, err
	}
	c, err := Dial(cfg, logger)
	if err != nil {
		_ = ssh.Close()
		return nil, err
	}
	w := worker.New(c, cfg.TaskQueue, worker.Options{MaxConcurrentActivityExecutionSize: cfg.MaxConcurrentActivities})
	acts := &activities.Activities{Inventory: inv, Runner: ssh}
	workflows.Register(w, acts, &workflows.Dispatcher{Client: c, TaskQueue: cfg.TaskQueue, Inventory: inv, Acts: acts,
		Supervision: workflows.Supervision{Interval: cfg.SuperviseInterval, LimitPolls: cfg.LimitPolls}})
	if err := w.Start(); err != nil {
		c.Close()
		_ = ssh.Close()
		return nil, err
	}
	return &Worker{Client: c, SSH: ssh, w: w}, nil
}

// Stop stops polling, then closes the pool and the client.
func (w *Worker) Stop() {
	w.once.Do(func() {
		w.w.Stop()
		_ = w.SSH.Close()
		w.Client.Close()
	})
}

// RunWorker runs until ctx ends.
func RunWorker(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	w, err := StartWorker(cfg, logger)
	if err != nil {
		return err
	}
	logger.Info("worker started", "temporal", cfg.TemporalAddress, "namespace", cfg.TemporalNamespace,
		"task_queue", cfg.TaskQueue, "inventory", cfg.Inventory)
	<-ctx.Done()
	w.Stop()
	return nil
}
