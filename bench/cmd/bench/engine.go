package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/workflows"
)

// The engines drover runs on in the bench (BENCH_TEMPORAL).
const (
	// temporalDev is the pinned CLI's dev server: one history shard on
	// SQLite, in one process.
	temporalDev = "dev"
	// temporalCluster is a Temporal server built from its Go module on a
	// PostgreSQL of its own, with BENCH_CLUSTER_SHARDS history shards
	// (make cluster runs the same by hand).
	temporalCluster = "cluster"
)

// loadEngine reads BENCH_TEMPORAL and BENCH_CLUSTER_SHARDS into s.
func loadEngine(s *settings) error {
	s.temporal = envOr("BENCH_TEMPORAL", temporalDev)
	switch s.temporal {
	case temporalDev:
	case temporalCluster:
		s.shards = 16
		if v := os.Getenv("BENCH_CLUSTER_SHARDS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("BENCH_CLUSTER_SHARDS: %q is not a shard count", v)
			}
			s.shards = n
		}
	default:
		return fmt.Errorf("BENCH_TEMPORAL: unknown engine %q; want %s or %s", s.temporal, temporalDev, temporalCluster)
	}
	return nil
}

// temporalEngine is drover's Temporal for the run.
type temporalEngine struct {
	address string
	// desc names a cluster in the reports; empty for the dev server, whose
	// reports read as before.
	desc string
	stop func() error
	// pid is the dev server's process; 0 for a cluster.
	pid int
}

// startEngine starts the engine s asks for, its Prometheus metrics on
// 127.0.0.1:metricsPort, drover's search attributes registered in
// namespace default.
func startEngine(s settings, metricsPort int) (*temporalEngine, error) {
	if s.temporal != temporalCluster {
		dir, err := os.MkdirTemp(devServerDir(), "drover-temporal-")
		if err != nil {
			return nil, err
		}
		srv, err := testbed.StartTemporal(testbed.TemporalOptions{SearchAttributes: workflows.SearchAttributeTypes, MetricsPort: metricsPort,
			DBFile: filepath.Join(dir, "temporal.db"),
			// The dev server's SQLite otherwise syncs the disk at every
			// transaction, and every host op is a dozen of them: on a shared
			// disk the engine then measures the disk. A production cluster's
			// store does not work that way.
			SQLitePragmas: sqlitePragmas()})
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		return &temporalEngine{address: srv.Address, pid: srv.Pid(), stop: func() error {
			err := srv.Stop()
			_ = os.RemoveAll(dir)
			return err
		}}, nil
	}
	log.Printf("starting PostgreSQL and a Temporal server with %d history shards", s.shards)
	c, err := testbed.StartCluster(testbed.ClusterOptions{Shards: s.shards, MetricsPort: metricsPort,
		SearchAttributes: workflows.SearchAttributeTypes})
	if err != nil {
		return nil, err
	}
	log.Printf("Temporal server %s at %s, PostgreSQL %s at 127.0.0.1:%d, in %s", c.ServerVersion, c.Address, c.PGVersion, c.PGPort, c.Dir)
	return &temporalEngine{address: c.Address, stop: c.Stop,
		desc: fmt.Sprintf("Temporal server %s on PostgreSQL %s, %d history shards", c.ServerVersion, c.PGVersion, c.Shards)}, nil
}

// devServerDir holds the dev server's database: tmpfs when the machine has
// it. The documented dev server (docs/operating.md) keeps its state in
// memory; the bench keeps a file, which a restarted server reads again,
// where that state is.
func devServerDir() string {
	if os.Getenv("BENCH_SQLITE_SYNC") == "full" {
		return ""
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && unix.Access("/dev/shm", unix.W_OK) == nil {
		return "/dev/shm"
	}
	return ""
}

// devServerStore says where the dev server keeps its state, for the reports.
func devServerStore() string {
	where := "in a file on disk"
	if devServerDir() != "" {
		where = "in a file on tmpfs"
	}
	sync := "in WAL mode, synced at checkpoints"
	if sqlitePragmas() == nil {
		sync = "synced at every transaction"
	}
	return "SQLite " + sync + ", " + where + "; with docs/operating.md's flags: search attributes cached, one partition per task queue, 20 s long polls, GOGC=" + testbed.DevServerGOGC
}
