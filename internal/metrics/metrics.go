// Package metrics serves a worker's Prometheus metrics: the Temporal SDK's
// own (workflow and activity latencies, task slots, poller counts) and
// drover's (hosts reachable, SSH handshakes, pool hits, supervision events).
package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// Metrics is one worker's registry.
type Metrics struct {
	Registry *prometheus.Registry
	// SDK goes into client.Options.MetricsHandler. Workflows count their
	// supervision events through it; the SDK drops what replays emit.
	SDK   client.MetricsHandler
	scope io.Closer

	mu        sync.Mutex
	reachable map[proc.HostID]bool
}

// SSHStats is what the pool reports; nil when the worker has no SSH pool.
type SSHStats func() transport.SSHStats

// New builds the registry. sshStats is read at each scrape.
func New(sshStats SSHStats) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reporter := tallyprom.NewReporter(tallyprom.Options{Registerer: reg})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	m := &Metrics{Registry: reg, SDK: sdktally.NewMetricsHandler(scope), scope: closer, reachable: map[proc.HostID]bool{}}

	hosts := func(want bool) func() float64 {
		return func() float64 {
			m.mu.Lock()
			defer m.mu.Unlock()
			n := 0
			for _, ok := range m.reachable {
				if ok == want {
					n++
				}
			}
			return float64(n)
		}
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "drover_hosts_reachable",
			Help: "Hosts whose last command reached them."}, hosts(true)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "drover_hosts_unreachable",
			Help: "Hosts whose last command could not connect or timed out."}, hosts(false)),
	)
	if sshStats != nil {
		stat := func(pick func(transport.SSHStats) int64) func() float64 {
			return func() float64 { return float64(pick(sshStats())) }
		}
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "drover_ssh_handshakes_total",
				Help: "SSH handshakes made (each is a new pooled connection)."}, stat(func(s transport.SSHStats) int64 { return s.Handshakes })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "drover_ssh_pool_hits_total",
				Help: "Commands that reused a pooled SSH connection."}, stat(func(s transport.SSHStats) int64 { return s.PoolHits })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "drover_ssh_execs_total",
				Help: "Commands run over SSH."}, stat(func(s transport.SSHStats) int64 { return s.Execs })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "drover_ssh_evictions_total",
				Help: "Pooled SSH connections dropped as dead."}, stat(func(s transport.SSHStats) int64 { return s.Evictions })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "drover_ssh_trims_total",
				Help: "Idle SSH connections closed to stay within max_pooled_connections."}, stat(func(s transport.SSHStats) int64 { return s.Trims })),
		)
	}
	return m
}

// Track wraps a runner so each command's outcome updates host reachability.
// The wrapper is also a transport.Connector, passing Connect on to r when r
// has it, so that callers looking for one still find it.
func (m *Metrics) Track(r transport.Runner) transport.Runner {
	return trackingRunner{next: r, m: m}
}

var _ transport.Connector = trackingRunner{}

type trackingRunner struct {
	next transport.Runner
	m    *Metrics
}

func (t trackingRunner) Run(ctx context.Context, host inventory.Host, cmd transport.Command) (transport.Result, error) {
	res, err := t.next.Run(ctx, host, cmd)
	if ctx.Err() == nil { // a cancelled op says nothing about the host
		k := transport.KindOf(err)
		t.m.mu.Lock()
		t.m.reachable[host.ID()] = k != transport.KindUnreachable && k != transport.KindTimeout
		t.m.mu.Unlock()
	}
	return res, err
}

// Connect passes through. Its outcome leaves reachability alone: the
// command that follows reports it.
func (t trackingRunner) Connect(ctx context.Context, host inventory.Host) error {
	if c, ok := t.next.(transport.Connector); ok {
		return c.Connect(ctx, host)
	}
	return nil
}

// Serve serves /metrics on ln until ctx ends.
func (m *Metrics) Serve(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close flushes the SDK scope.
func (m *Metrics) Close() error { return m.scope.Close() }
