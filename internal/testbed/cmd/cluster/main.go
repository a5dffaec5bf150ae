// Command cluster runs a Temporal server on a PostgreSQL of its own, in the
// foreground, for manual runs against a production-shaped engine (make
// cluster): PostgreSQL in a throwaway directory, the server's databases and
// schemas, the server with the given number of history shards, namespace
// default with drover's search attributes. It prints the frontend's address
// and waits; Ctrl-C stops both and removes what they wrote, unless --dir
// named the directory.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/workflows"
)

func main() {
	shards := flag.Int("shards", 16, "history shards")
	port := flag.Int("port", 0, "frontend port on 127.0.0.1 (0: a free one)")
	metricsPort := flag.Int("metrics-port", 0, "serve the server's Prometheus metrics on 127.0.0.1:PORT/metrics (0: none)")
	dir := flag.String("dir", "", "directory for the database, config and logs, kept at exit (empty: a temp dir, removed)")
	flag.Parse()
	opts := testbed.ClusterOptions{Shards: *shards, MetricsPort: *metricsPort, SearchAttributes: workflows.SearchAttributeTypes}
	if *port != 0 {
		opts.Address = fmt.Sprintf("127.0.0.1:%d", *port)
	}
	if *dir != "" {
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			fatal(err)
		}
		opts.Dir = *dir
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	fmt.Printf("starting PostgreSQL and the Temporal server (%d history shards)\n", *shards)
	c, err := testbed.StartCluster(opts)
	if err != nil {
		fatal(err)
	}
	fmt.Printf("frontend   %s (namespace default)\n", c.Address)
	if *metricsPort != 0 {
		fmt.Printf("metrics    http://127.0.0.1:%d/metrics\n", *metricsPort)
	}
	fmt.Printf("postgres   127.0.0.1:%d, socket in %s/pg, log %s/pg/postgres.log\n", c.PGPort, c.Dir, c.Dir)
	fmt.Printf("server     pid %d, config %s/config, log %s\n", c.ServerPid(), c.Dir, c.ServerLog)
	fmt.Printf("e.g.       bin/worker with temporal_address %s; Ctrl-C stops\n", c.Address)
	<-sig
	fmt.Println("stopping")
	if err := c.Stop(); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "cluster:", err)
	os.Exit(1)
}
