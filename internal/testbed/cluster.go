package testbed

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
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

// pgBin is $DROVER_PG_BIN, else the newest of Debian's PostgreSQL versions.
func pgBin() (string, error) {
	if p := os.Getenv("DROVER_PG_BIN"); p != "" {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var best string
	bestV := -1
	for _, d := range dirs {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err != nil || v <= bestV {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			best, bestV = d, v
		}
	}
	if best == "" {
		return "", errors.New("PostgreSQL not found under /usr/lib/postgresql (make cluster-deps installs Debian's)")
	}
	return best, nil
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

// pgUser is who runs PostgreSQL: the postgres account when this process is
// root (postgres refuses root), else this process's own user.
func pgUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL runs as user postgres, which is missing (make cluster-deps): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// pgConf is appended to initdb's postgresql.conf: production-shaped (every
// commit is flushed to disk and waited for), modestly sized.
const pgConf = `
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 300
shared_buffers = 256MB
effective_cache_size = 1GB
fsync = on
synchronous_commit = on
full_page_writes = on
max_wal_size = 2GB
checkpoint_timeout = 5min
log_min_messages = warning
log_checkpoints = on
`

func (c *Cluster) startPostgres() error {
	cred, err := pgUser()
	if err != nil {
		return err
	}
	sock := filepath.Join(c.Dir, "pg")
	data := filepath.Join(sock, "data")
	if err := os.MkdirAll(sock, 0o700); err != nil {
		return err
	}
	if cred != nil {
		if err := os.Chown(sock, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	asPG := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(c.opts.PGBin, name), args...)
		cmd.Dir = sock
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
		return cmd
	}
	if out, err := asPG("initdb", "-D", data, "-U", "postgres", "-E", "UTF8", "--no-locale",
		"--auth-local=trust", "--auth-host=scram-sha-256").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if c.PGPort, err = FreePort(); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, pgConf, c.PGPort, sock)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// The postmaster is this process's child, not pg_ctl's daemon: should
	// this process die, it shuts down at once (SIGQUIT) with it.
	cmd := asPG("postgres", "-D", data)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	logFile := filepath.Join(sock, "postgres.log")
	if c.pg, err = startChild(cmd, logFile); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := c.psql("CREATE ROLE " + clusterDBUser + " LOGIN CREATEDB PASSWORD '" + clusterDBPassword + "'")
		if err == nil {
			return nil
		}
		if c.pg.exited() || time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile)
			return fmt.Errorf("postgres not ready: %v\n%s", err, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// psql runs one statement as the superuser over the unix socket.
func (c *Cluster) psql(stmt string) error {
	cmd := exec.Command(filepath.Join(c.opts.PGBin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
		"-h", filepath.Join(c.Dir, "pg"), "-p", strconv.Itoa(c.PGPort), "-U", "postgres", "-d", "postgres", "-c", stmt)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("psql: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// createSchemas creates the server's two databases and applies the schemas
// embedded in temporal-sql-tool, as the server's docs set up a cluster.
func (c *Cluster) createSchemas() error {
	for _, db := range []struct{ name, schema string }{
		{"temporal", "postgresql/v12/temporal"},
		{"temporal_visibility", "postgresql/v12/visibility"},
	} {
		for _, step := range [][]string{
			{"create-database"},
			{"setup-schema", "-v", "0.0"},
			{"update-schema", "--schema-name", db.schema},
		} {
			args := append([]string{"--plugin", "postgres12", "--ep", "127.0.0.1", "-p", strconv.Itoa(c.PGPort),
				"-u", clusterDBUser, "--pw", clusterDBPassword, "--db", db.name}, step...)
			if out, err := exec.Command(c.opts.SQLTool, args...).CombinedOutput(); err != nil {
				return fmt.Errorf("temporal-sql-tool %s %s: %v\n%s", db.name, step[0], err, out)
			}
		}
	}
	return nil
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
// version check), the dev server's own raised persistence and visibility
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

// waitFrontend waits until the frontend answers a health check.
func (c *Cluster) waitFrontend(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		cl, err := client.Dial(client.Options{HostPort: c.Address, Namespace: "temporal-system", Logger: quietLogger{}})
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = cl.CheckHealth(ctx, &client.CheckHealthRequest{})
			cancel()
			cl.Close()
			if err == nil {
				return nil
			}
		}
		if c.server.exited() {
			c.server = nil
			return errClusterExited
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("temporal server at %s not ready after %s (log: %s): %v", c.Address, limit, c.ServerLog, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// saTypes are the search attribute types by the names StartTemporal's
// --search-attribute takes.
var saTypes = map[string]enumspb.IndexedValueType{
	"Text":        enumspb.INDEXED_VALUE_TYPE_TEXT,
	"Keyword":     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"Int":         enumspb.INDEXED_VALUE_TYPE_INT,
	"Double":      enumspb.INDEXED_VALUE_TYPE_DOUBLE,
	"Bool":        enumspb.INDEXED_VALUE_TYPE_BOOL,
	"Datetime":    enumspb.INDEXED_VALUE_TYPE_DATETIME,
	"KeywordList": enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}

// namespaceRefresh is how long every service's namespace registry takes to
// see a namespace change (system.namespaceCacheRefreshInterval, 2 s), and a
// margin.
const namespaceRefresh = 3 * time.Second

// setupNamespace registers namespace default with a retention of one day
// and adds the search attributes, then waits for every service to see
// them.
func (c *Cluster) setupNamespace() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.Dial(client.Options{HostPort: c.Address, Logger: quietLogger{}})
	if err != nil {
		return err
	}
	defer cl.Close()
	retry := func(what string, f func() error) error {
		for {
			err := f()
			if err == nil {
				return nil
			}
			var unavailable *serviceerror.Unavailable
			var notFound *serviceerror.NamespaceNotFound
			if !errors.As(err, &unavailable) && !errors.As(err, &notFound) || ctx.Err() != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	if err := retry("register namespace default", func() error {
		_, err := cl.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: "default", WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
		var exists *serviceerror.NamespaceAlreadyExists
		if errors.As(err, &exists) {
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	if err := retry("describe namespace default", func() error {
		_, err := cl.WorkflowService().DescribeNamespace(ctx, describeDefault())
		return err
	}); err != nil {
		return err
	}
	// The frontend adds search attributes with its own namespace registry,
	// which must know the namespace first.
	time.Sleep(namespaceRefresh)
	if len(c.opts.SearchAttributes) > 0 {
		want := map[string]enumspb.IndexedValueType{}
		for name, typ := range c.opts.SearchAttributes {
			t, ok := saTypes[typ]
			if !ok {
				return fmt.Errorf("search attribute %s: unknown type %q", name, typ)
			}
			want[name] = t
		}
		if err := retry("add search attributes", func() error {
			have, err := cl.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
			if err != nil {
				return err
			}
			missing := map[string]enumspb.IndexedValueType{}
			for name, t := range want {
				if _, ok := have.CustomAttributes[name]; !ok {
					missing[name] = t
				}
			}
			if len(missing) == 0 {
				return nil
			}
			_, err = cl.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
				Namespace: "default", SearchAttributes: missing})
			if err == nil {
				// Listed again on the next round, until every one is there.
				err = serviceerror.NewUnavailable("search attributes added, not yet listed")
			}
			return err
		}); err != nil {
			return err
		}
		time.Sleep(namespaceRefresh)
	}
	return nil
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
