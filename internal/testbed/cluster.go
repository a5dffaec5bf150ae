package testbed

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ClusterOptions configures a Temporal server on a PostgreSQL of its own:
// the production-shaped engine of the cluster benchmarks, where the dev
// server is one history shard on SQLite.
type ClusterOptions struct {
	// ServerBinary is the Temporal server (go.temporal.io/server/cmd/server);
	// default: $DROVER_TEMPORAL_SERVER_BIN, else bin/temporal-server at the
	// module root (make bin/temporal-server).
	ServerBinary string
	// SQLTool is the server's temporal-sql-tool, which creates the
	// databases and applies the schemas it embeds; default:
	// $DROVER_TEMPORAL_SQL_TOOL_BIN, else bin/temporal-sql-tool.
	SQLTool string
	// PGBin holds initdb, postgres and psql; default: $DROVER_PG_BIN, else
	// Debian's newest /usr/lib/postgresql/*/bin.
	PGBin string
	// Shards is the number of history shards; default 16.
	Shards int
	// Address is the frontend's; empty picks a free port on 127.0.0.1.
	Address string
	// MetricsPort serves the server's Prometheus metrics on
	// 127.0.0.1:MetricsPort/metrics when non-zero.
	MetricsPort int
	// SearchAttributes are registered in namespace default at start, name
	// -> type (Keyword, KeywordList, Int, ...).
	SearchAttributes map[string]string
	// Dir holds the database, the config and the logs; empty means a temp
	// dir, removed at Stop.
	Dir string
	// LogFile receives the server's output; empty: server.log in Dir.
	LogFile string
}

// Cluster is a running Temporal server and its PostgreSQL, both owned by
// this process.
type Cluster struct {
	// Address is the frontend's gRPC address.
	Address string
	// Dir holds pg/ (the database, its socket and postgres.log) and
	// config/ (the server's config and dynamic config).
	Dir string
	// PGPort is PostgreSQL's TCP port on 127.0.0.1; its unix socket is in
	// Dir/pg.
	PGPort int
	// Shards is the number of history shards.
	Shards int
	// ServerLog is the server's output.
	ServerLog string
	// ServerVersion and PGVersion are what the binaries say they are
	// ("1.29.1", "15.18").
	ServerVersion, PGVersion string

	opts    ClusterOptions
	tempDir bool
	pg      *child
	server  *child
}

// The database role the server connects as, over TCP with a password.
const (
	clusterDBUser     = "temporal"
	clusterDBPassword = "temporal"
)

// StartCluster starts PostgreSQL in a directory of its own, creates the
// server's databases and schemas, writes the server's config and starts it,
// then registers namespace default (retention 1 day) and the search
// attributes. It returns once the frontend answers in namespace default.
func StartCluster(opts ClusterOptions) (*Cluster, error) {
	if opts.ServerBinary == "" {
		opts.ServerBinary = binOr("DROVER_TEMPORAL_SERVER_BIN", "temporal-server")
	}
	if opts.SQLTool == "" {
		opts.SQLTool = binOr("DROVER_TEMPORAL_SQL_TOOL_BIN", "temporal-sql-tool")
	}
	for _, b := range []string{opts.ServerBinary, opts.SQLTool} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("%s not found (run `make bin/%s`): %w", b, filepath.Base(b), err)
		}
	}
	if opts.PGBin == "" {
		var err error
		if opts.PGBin, err = pgBin(); err != nil {
			return nil, err
		}
	}
	if opts.Shards <= 0 {
		opts.Shards = 16
	}
	c := &Cluster{Dir: opts.Dir, Shards: opts.Shards, opts: opts}
	if c.Dir == "" {
		dir, err := os.MkdirTemp("", "drover-cluster-")
		if err != nil {
			return nil, err
		}
		c.Dir, c.tempDir = dir, true
	}
	if err := c.start(); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

func binOr(env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	return filepath.Join(ModuleRoot(), "bin", name)
}

func (c *Cluster) start() error {
	if err := os.Chmod(c.Dir, 0o755); err != nil {
		return err
	}
	c.ServerVersion = versionOf(exec.Command(c.opts.ServerBinary, "--version"))
	c.PGVersion = versionOf(exec.Command(filepath.Join(c.opts.PGBin, "postgres"), "-V"))
	if err := c.startPostgres(); err != nil {
		return err
	}
	if err := c.createSchemas(); err != nil {
		return err
	}
	// The server picks its ports afresh at each attempt: another process
	// can take one between the pick and the server's listen.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = c.startServer(); !errors.Is(err, errClusterExited) {
			break
		}
	}
	if err != nil {
		return err
	}
	return c.setupNamespace()
}

// versionOf is the version cmd prints on its first line: the last word of
// "temporal version 1.29.1", the third of "postgres (PostgreSQL) 15.18
// (Debian 15.18-0+deb12u1)".
func versionOf(cmd *exec.Cmd) string {
	out, _ := cmd.Output()
	line, _, _ := strings.Cut(string(out), "\n")
	f := strings.Fields(line)
	switch {
	case len(f) >= 3 && f[1] == "(PostgreSQL)":
		return f[2]
	case len(f) > 0:
		return f[len(f)-1]
	}
	return "unknown"
}

// clusterConfig is the server's static config. Every service runs in the
// one process, as the dev server's do; each has its own connection pool.
const clusterConfig = `log:
  stdout: true
  level: warn

persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: {{shards}}
  datastores:
    postgres-default:
      sql:
        pluginName: postgres12
        databaseName: temporal
        connectAddr: "127.0.0.1:{{pgport}}"
        connectProtocol: tcp
        user: {{user}}
        password: {{password}}
        maxConns: 50
        maxIdleConns: 50
        maxConnLifetime: 1h
    postgres-visibility:
      sql:
        pluginName: postgres12
        databaseName: temporal_visibility
        connectAddr: "127.0.0.1:{{pgport}}"
        connectProtocol: tcp
        user: {{user}}
        password: {{password}}
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: 1h

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
{{metrics}}
services:
  frontend:
    rpc:
      grpcPort: {{frontend}}
      membershipPort: {{frontend-membership}}
      httpPort: {{frontend-http}}
      bindOnLocalHost: true
  history:
    rpc:
      grpcPort: {{history}}
      membershipPort: {{history-membership}}
      bindOnLocalHost: true
  matching:
    rpc:
      grpcPort: {{matching}}
      membershipPort: {{matching-membership}}
      bindOnLocalHost: true
  worker:
    rpc:
      grpcPort: {{worker}}
      membershipPort: {{worker-membership}}
      bindOnLocalHost: true

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "{{address}}"
      httpAddress: "127.0.0.1:{{frontend-http}}"

dcRedirectionPolicy:
  policy: noop

archival:
  history:
    state: disabled
  visibility:
    state: disabled

namespaceDefaults:
  archival:
    history:
      state: disabled
    visibility:
      state: disabled

publicClient:
  hostPort: "{{address}}"

dynamicConfigClient:
  filepath: "{{dynamic}}"
  pollInterval: 10s
`

// clusterMetrics is the Prometheus listener the dev server gets from
// --metrics-port (tally, /metrics), so both name and label their series
// alike.
const clusterMetrics = `  metrics:
    prometheus:
      listenAddress: "127.0.0.1:%d"
      handlerPath: /metrics
`

// ClusterDynamicConfig is the server's dynamic config: what
// testbed.StartTemporal gives the dev server (eager activity execution;
// the namespace and frontend rates drover's ops on many hosts need; no
// version check; 20 s long polls), the dev server's own raised persistence and visibility
// rates, and, stated for the reader, the 1.29 defaults drover relies on
// (eager workflow start, workflow updates, update-with-start). Left out:
// the dev server's search-attribute cache refresh at every read (a test
// convenience that costs a database read per use) and its small history
// cache (a dev server's memory saving).
const ClusterDynamicConfig = `frontend.enableServerVersionCheck:
  - value: false
frontend.namespaceRPS:
  - value: 20000
frontend.rps:
  - value: 20000
system.enableActivityEagerExecution:
  - value: true
frontend.persistenceMaxQPS:
  - value: 10000
history.persistenceMaxQPS:
  - value: 45000
frontend.namespaceRPS.visibility:
  - value: 100
system.enableEagerWorkflowStart:
  - value: true
frontend.enableUpdateWorkflowExecution:
  - value: true
frontend.enableUpdateWorkflowExecutionAsyncAccepted:
  - value: true
frontend.enableExecuteMultiOperation:
  - value: true
matching.longPollExpirationInterval:
  - value: 20s
`

// errClusterExited is a server that exited before it was ready.
var errClusterExited = errors.New("temporal server exited during start-up")

func (c *Cluster) startServer() error {
	ports := map[string]int{}
	for _, k := range []string{"frontend", "frontend-membership", "frontend-http", "history", "history-membership",
		"matching", "matching-membership", "worker", "worker-membership"} {
		p, err := lowFreePort(ports)
		if err != nil {
			return err
		}
		ports[k] = p
	}
	c.Address = c.opts.Address
	if c.Address == "" {
		c.Address = "127.0.0.1:" + strconv.Itoa(ports["frontend"])
	} else {
		_, port, err := splitPort(c.Address)
		if err != nil {
			return err
		}
		ports["frontend"] = port
	}
	confDir := filepath.Join(c.Dir, "config")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return err
	}
	dynamic := filepath.Join(confDir, "dynamicconfig.yaml")
	if err := os.WriteFile(dynamic, []byte(ClusterDynamicConfig), 0o644); err != nil {
		return err
	}
	metrics := ""
	if c.opts.MetricsPort != 0 {
		metrics = fmt.Sprintf(clusterMetrics, c.opts.MetricsPort)
	}
	repl := []string{"{{shards}}", strconv.Itoa(c.Shards), "{{pgport}}", strconv.Itoa(c.PGPort),
		"{{user}}", clusterDBUser, "{{password}}", clusterDBPassword, "{{metrics}}", metrics,
		"{{address}}", c.Address, "{{dynamic}}", dynamic}
	for k, p := range ports {
		repl = append(repl, "{{"+k+"}}", strconv.Itoa(p))
	}
	conf := strings.NewReplacer(repl...).Replace(clusterConfig)
	if err := os.WriteFile(filepath.Join(confDir, "cluster.yaml"), []byte(conf), 0o644); err != nil {
		return err
	}
	c.ServerLog = c.opts.LogFile
	if c.ServerLog == "" {
		c.ServerLog = filepath.Join(c.Dir, "server.log")
	}
	cmd := exec.Command(c.opts.ServerBinary, "--root", c.Dir, "--config", "config", "--env", "cluster", "--allow-no-auth", "start")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var err error
	if c.server, err = startChild(cmd, c.ServerLog); err != nil {
		return fmt.Errorf("start temporal server: %w", err)
	}
	return c.waitFrontend(90 * time.Second)
}

// lowFreePort is a free TCP port on 127.0.0.1 below the kernel's ephemeral
// range, none of taken: the server records each service's membership port
// in a PostgreSQL smallint (at most 32767).
func lowFreePort(taken map[string]int) (int, error) {
	for range 200 {
		p := 20000 + rand.IntN(12000)
		if slices.Contains(slices.Collect(maps.Values(taken)), p) {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, errors.New("no free port on 127.0.0.1 between 20000 and 32000")
}

func splitPort(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("address %q has no port", addr)
	}
	p, err := strconv.Atoi(addr[i+1:])
	return addr[:i], p, err
}

// Stop stops the server (SIGINT, then SIGKILL after 20 s) and PostgreSQL
// (a fast shutdown), and removes the directory when it was a temp dir.
func (c *Cluster) Stop() error {
	c.server.stop(syscall.SIGINT, 20*time.Second)
	c.pg.stop(syscall.SIGINT, 30*time.Second)
	if c.tempDir {
		return os.RemoveAll(c.Dir)
	}
	return nil
}

// ServerPid is the server's process id.
func (c *Cluster) ServerPid() int { return c.server.cmd.Process.Pid }
