package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/activities/dispatch"
	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/filestore"
	"github.com/drover-sh/drover/internal/metrics"
	"github.com/drover-sh/drover/internal/version"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/transport"
	"github.com/drover-sh/drover/workflows"
)

// Dial connects to Temporal with the configured address and namespace.
func Dial(cfg config.Config, logger *slog.Logger) (client.Client, error) {
	return dialWithMetrics(cfg, logger, nil, "")
}

// taskEngine is the task engine of the starter's commands and the HTTP
// server: it decodes host workflows' memos as the client encodes payloads,
// and with an inventory it maps agent ids.
func taskEngine(c client.Client, cfg config.Config, inv *inventory.Inventory) *engine.Engine {
	return &engine.Engine{Client: c, TaskQueue: cfg.TaskQueue, Inventory: inv, DataConverter: dataConverter(cfg)}
}

// engineWith is taskEngine keeping pushed contents in store.
func engineWith(c client.Client, cfg config.Config, inv *inventory.Inventory, store gseapi.ContentStore) *engine.Engine {
	e := taskEngine(c, cfg, inv)
	e.Files = store
	return e
}

// dataConverter is the client's payload converter, nil for the default.
func dataConverter(cfg config.Config) converter.DataConverter {
	opts, err := cfg.ClientOptions()
	if err != nil {
		return nil
	}
	return opts.DataConverter
}

// dialWithMetrics is Dial reporting the SDK's metrics to handler, if any,
// under identity (the SDK's pid@host when empty).
func dialWithMetrics(cfg config.Config, logger *slog.Logger, handler client.MetricsHandler, identity string) (client.Client, error) {
	opts, err := cfg.ClientOptions()
	if err != nil {
		return nil, err
	}
	opts.Logger = tlog.NewStructuredLogger(logger)
	opts.MetricsHandler = handler
	opts.Identity = identity
	c, err := client.Dial(opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	return c, nil
}

// stopTimeout is how long Stop lets running host ops go on: the longest
// deadline a spec within the API's bounds can give an op.
var stopTimeout = policies.WorkerStopTimeout(gseapi.Seconds(gseapi.MaxOpTimeoutSecs), gseapi.Seconds(gseapi.MaxCheckSecs))

// Worker is a running drover worker: its client, SSH pool, WinRM runner
// and Temporal worker.
type Worker struct {
	Client  client.Client
	SSH     *transport.SSH
	WinRM   *transport.WinRM
	Metrics *metrics.Metrics
	// MetricsAddr is where /metrics is served; empty when it is not.
	MetricsAddr string
	// PooledConnections is the SSH pool's cap, as configured or sized.
	PooledConnections int
	// Inventory is the worker's, kept current with its file.
	Inventory *inventory.Inventory
	live      *inventory.Live
	stopWatch context.CancelFunc
	w         worker.Worker
	// tasks serves the tasks' queue, watches supervision's watch queue,
	// each with its own slots.
	tasks       worker.Worker
	watches     worker.Worker
	stopMetrics context.CancelFunc
	store       filestore.Store
	once        sync.Once
}

// StartWorker loads the inventory, opens the SSH pool and starts polling.
func StartWorker(cfg config.Config, logger *slog.Logger) (*Worker, error) {
	inv, err := inventory.Load(cfg.Inventory)
	if err != nil {
		return nil, err
	}
	store, err := openServingStore(cfg, logger)
	if err != nil {
		return nil, err
	}
	pooled := cfg.MaxPooledConnections
	if pooled == 0 {
		pooled = policies.PooledConnections(openFileLimit(), cfg.MaxConcurrentDials)
	}
	ssh, err := transport.NewSSH(transport.SSHOptions{KnownHostsPath: inv.KnownHosts(),
		MaxSessionsPerHost: cfg.MaxSessionsPerHost, MaxPooled: pooled,
		IdleTimeout: cfg.IdleConnectionTimeout, MaxDials: cfg.MaxConcurrentDials,
		TrustOnFirstUse: cfg.SSHTOFU, OnTrust: func(addr, fingerprint string) {
			logger.Warn("host key trusted on first use", "host", addr, "key", fingerprint, "known_hosts", inv.KnownHosts())
		}})
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	// Activities, the dispatcher and supervision read inv at each lookup:
	// a reload reaches them all at once.
	live := inventory.NewLive(cfg.Inventory, inv, logger, func(next *inventory.Inventory) error {
		return ssh.UseKnownHosts(next.KnownHosts())
	})
	m := metrics.New(ssh.Stats)
	c, err := dialWithMetrics(cfg, logger, m.SDK, WorkerIdentity())
	if err != nil {
		_ = ssh.Close()
		_ = store.Close()
		return nil, err
	}
	// Process-wide, and read when the first worker starts; a Config
	// built in code without it keeps the SDK's.
	if cfg.WorkflowCacheSize > 0 {
		worker.SetStickyWorkflowCacheSize(cfg.WorkflowCacheSize)
	}
	// With autoscaling the configured pollers are a ceiling: an idle
	// worker keeps the fewest (every long poll is a request to the
	// server, and quiet supervision has a budget of 1 request/s per
	// 1,000 hosts), and an op's burst of tasks scales them up.
	w := worker.New(c, cfg.TaskQueue, opsWorkerOptions(cfg,
		pollers(!cfg.PollerAutoscaling, 2, cfg.WorkflowTaskPollers),
		pollers(!cfg.PollerAutoscaling, 1, cfg.ActivityTaskPollers)))
	winrm := transport.NewWinRM(transport.WinRMOptions{})
	// Hosts of transport "simulated" are answered in-process: benchmarks
	// only (docs/benchmarks.md).
	runners := transport.Multi{SSH: ssh, WinRM: winrm, Simulated: transport.NewSimulated(simulatedLatency)}
	acts := &activities.Activities{Inventory: inv, Runner: m.Track(runners),
		Files: runners, Store: store, Hosts: dispatch.HostLink{Client: c}}
	d := &dispatch.Dispatcher{Client: c, TaskQueue: cfg.TaskQueue, Inventory: inv, Acts: acts, DataConverter: dataConverter(cfg),
		SessionsPerHost: cfg.MaxSessionsPerHost,
		Supervision: workflows.Supervision{Interval: cfg.SuperviseInterval, LimitPolls: cfg.LimitPolls,
			TimeZone: cfg.CrontabZone(), WatchQueue: cfg.WatchQueue(), WatchShards: cfg.WatchShards, Off: cfg.NoSupervision}}
	// Tasks begun before they had a queue of their own run here too.
	dispatch.Register(w, acts, d)
	// A task's and its chunks' workflow tasks, and its batches, on a queue
	// of their own: behind a fleet op's host workflow tasks on the one
	// sticky queue, a chunk's task waited minutes, the answers signalled
	// to it piling up in its state, while its batches' heartbeats and
	// signals timed out.
	tasks := worker.New(c, policies.TasksQueue(cfg.TaskQueue), opsWorkerOptions(cfg,
		pollers(!cfg.PollerAutoscaling, 1, tasksPollers),
		pollers(!cfg.PollerAutoscaling, 1, tasksPollers)))
	dispatch.Register(tasks, acts, d)
	// Watches are long-lived: on a queue of their own, with their own
	// slots, they never hold the slots ops need.
	// One poller: every long poll is a request to the server, whether or
	// not a watch is waiting, and a shard watch is taken up once an hour.
	// A stopping worker gives its watches time to hand themselves back
	// (see activities.Watch), rather than leaving each to its heartbeat
	// timeout.
	watches := worker.New(c, cfg.WatchQueue(), worker.Options{MaxConcurrentActivityExecutionSize: cfg.MaxConcurrentWatches,
		DisableWorkflowWorker: true, WorkerStopTimeout: watchStopTimeout, MaxConcurrentActivityTaskPollers: 1})
	dispatch.RegisterWatch(watches, acts)
	wk := &Worker{Client: c, SSH: ssh, WinRM: winrm, Metrics: m, Inventory: inv, PooledConnections: pooled, live: live, store: store, w: w, tasks: tasks, watches: watches, stopMetrics: func() {}}
	if cfg.MetricsListen != "" {
		ln, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			c.Close()
			_ = ssh.Close()
			return nil, fmt.Errorf("metrics_listen %s: %w", cfg.MetricsListen, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		wk.MetricsAddr, wk.stopMetrics = ln.Addr().String(), cancel
		go func() {
			if err := m.Serve(ctx, ln); err != nil {
				logger.Error("metrics server stopped", "err", err)
			}
		}()
	}
	if err := w.Start(); err != nil {
		wk.stopMetrics()
		c.Close()
		_ = ssh.Close()
		return nil, err
	}
	if err := tasks.Start(); err != nil {
		w.Stop()
		wk.stopMetrics()
		c.Close()
		_ = ssh.Close()
		return nil, err
	}
	if err := watches.Start(); err != nil {
		w.Stop()
		tasks.Stop()
		wk.stopMetrics()
		c.Close()
		_ = ssh.Close()
		return nil, err
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	wk.stopWatch = stopWatch
	live.Watch(watchCtx)
	return wk, nil
}

// opsWorkerOptions are the options of the workers that run ops (the hosts'
// and the tasks' queues), with their pollers.
func opsWorkerOptions(cfg config.Config, workflowPollers, activityPollers worker.PollerBehavior) worker.Options {
	return worker.Options{
		MaxConcurrentActivityExecutionSize: cfg.MaxConcurrentActivities,
		WorkflowTaskPollerBehavior:         workflowPollers,
		ActivityTaskPollerBehavior:         activityPollers,
		// A deploy stops polling and lets running host ops end by their own
		// deadlines: cancelling one would kill its command on the host.
		WorkerStopTimeout:            stopTimeout,
		MaxHeartbeatThrottleInterval: policies.HeartbeatThrottleMax,
		StickyScheduleToStartTimeout: policies.StickyScheduleToStart,
		DeadlockDetectionTimeout:     policies.WorkflowDeadlockTimeout,
	}
}

// tasksPollers bounds each poller kind of the tasks' queue: its tasks are
// few, a chunk's a thousand hosts.
const tasksPollers = 4

// simulatedLatency is what a simulated host adds to each command: about a
// round trip and an exec on a LAN.
const simulatedLatency = 2 * time.Millisecond

// WorkerIdentity is how a worker names itself to Temporal (pollers, task
// history, `temporal task-queue describe`): the SDK's pid@host plus the
// build, so an upgrade shows which workers still run the old one.
func WorkerIdentity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d@%s drover-worker %s", os.Getpid(), host, version.Get().Short())
}

// Reload reads the inventory again, as SIGHUP asks; on an error the last
// good one stays in use.
func (w *Worker) Reload() error { return w.live.Reload() }

// watchStopTimeout bounds how long a stopping worker waits for its watches
// to hand themselves back: a poll in progress ends first.
const watchStopTimeout = policies.WatchPollTimeout + 5*time.Second

// Stop stops polling, waits for the running host ops to end (up to
// stopTimeout), then closes the pool and the client.
func (w *Worker) Stop() {
	w.once.Do(func() {
		// Workflows first: a watch handed back (or a cancelled one ending)
		// makes a workflow task, which must go to a worker that stays, not
		// to this one on its way out.
		w.w.Stop()
		w.tasks.Stop()
		w.watches.Stop()
		w.stopWatch()
		w.stopMetrics()
		_ = w.SSH.Close()
		_ = w.WinRM.Close()
		w.Client.Close()
		_ = w.Metrics.Close()
		_ = w.store.Close()
	})
}

// RunWorker runs until ctx ends.
func RunWorker(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	w, err := StartWorker(cfg, logger)
	if err != nil {
		return err
	}
	logger.Info("worker started", "version", version.Get().String(), "temporal", cfg.TemporalAddress, "namespace", cfg.TemporalNamespace,
		"task_queue", cfg.TaskQueue, "tasks_task_queue", policies.TasksQueue(cfg.TaskQueue), "watch_task_queue", cfg.WatchQueue(), "inventory", cfg.Inventory, "metrics", w.MetricsAddr,
		"content_store", w.store.Location().String(), "max_pooled_connections", w.PooledConnections)
	reloadOnHangup(ctx, w.live)
	<-ctx.Done()
	logger.Info("worker stopping: no new work is taken; running host ops finish first")
	w.Stop()
	logger.Info("worker stopped")
	return nil
}

// pollers is a worker's poller behaviour: at most most pollers, scaled
// down to least while no tasks come, or always most when fixed.
func pollers(fixed bool, least, most int) worker.PollerBehavior {
	if fixed {
		return worker.NewPollerBehaviorSimpleMaximum(worker.PollerBehaviorSimpleMaximumOptions{MaximumNumberOfPollers: most})
	}
	return worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
		InitialNumberOfPollers: least, MinimumNumberOfPollers: least, MaximumNumberOfPollers: most})
}
