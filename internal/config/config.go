// Package config loads drover's settings: a file (--config, or ./drover.yaml
// when present), then DROVER_* environment variables, then flags, each
// overriding the one before.
package config

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"

	"github.com/drover-sh/drover/internal/filestore"
	"github.com/drover-sh/drover/policies"
)

// Config is every setting the binaries share. Keys are the koanf tags; the
// environment name is DROVER_ + the key in upper case (temporal_address ->
// DROVER_TEMPORAL_ADDRESS); the flag is the key with '-' for '_'.
type Config struct {
	TemporalAddress   string `koanf:"temporal_address"`
	TemporalNamespace string `koanf:"temporal_namespace"`
	TaskQueue         string `koanf:"task_queue"`
	Inventory         string `koanf:"inventory"`
	LogFormat         string `koanf:"log_format"`
	LogLevel          string `koanf:"log_level"`
	// SuperviseInterval is how often supervision polls each host.
	SuperviseInterval time.Duration `koanf:"supervise_interval"`
	// NoSupervision turns supervision off: no host this worker sends an op
	// to starts a watch. For fan-out measurements, where thousands of
	// watches would measure supervision instead.
	NoSupervision bool `koanf:"no_supervision"`
	// LimitPolls is how many consecutive polls over a cpu/mem limit act.
	LimitPolls int `koanf:"limit_polls"`
	// SuperviseTimeZone is the zone crontab rules are read in: host (each
	// host's own), UTC, a fixed offset (+08:00) or an IANA name.
	SuperviseTimeZone string `koanf:"supervise_timezone"`
	// WatchTaskQueue is where supervision's long-lived watches run, apart
	// from the ops; empty means TaskQueue + "-watch".
	WatchTaskQueue string `koanf:"watch_task_queue"`
	// MaxConcurrentWatches is how many hosts one worker watches at once.
	MaxConcurrentWatches int `koanf:"max_concurrent_watches"`
	// WatchShards is how many shard watches supervise the fleet: about
	// one per policies.HostsPerShard hosts. 0 gives every host a watch of
	// its own, as before shards.
	WatchShards int `koanf:"watch_shards"`
	// Apps may call the HTTP API.
	Apps []AppConfig `koanf:"apps"`

	// Connecting to a production cluster: mTLS and/or an API key.
	TLSCert       string `koanf:"tls_cert"`        // client certificate (PEM) for mTLS
	TLSKey        string `koanf:"tls_key"`         // its private key (PEM)
	TLSCA         string `koanf:"tls_ca"`          // CA bundle that signed the server's certificate
	TLSServerName string `koanf:"tls_server_name"` // when it differs from the address's host
	// APIKeyEnv names the environment variable holding a Temporal Cloud
	// API key; the key itself never sits in the config.
	APIKeyEnv string `koanf:"api_key_env"`
	// GRPCCompression is how requests to Temporal are compressed: none or
	// gzip. The SDK's gzip costs the worker and the server CPU on every
	// request, both ways; drover's are small, and on a LAN the CPU is the
	// budget. gzip saves bandwidth to a server far away.
	GRPCCompression string `koanf:"grpc_compression"`

	// Payload encryption: where the current AES-256 key is (a file, or the
	// name of an environment variable), and keys rotated out that still
	// decrypt older histories. Keys never sit in the config itself.
	CodecKeyFile     string   `koanf:"codec_key_file"`
	CodecKeyEnv      string   `koanf:"codec_key_env"`
	CodecOldKeyFiles []string `koanf:"codec_old_key_files"`

	// SSHTOFU records unknown hosts' keys in known_hosts on first contact
	// instead of refusing them. Off by default.
	SSHTOFU bool `koanf:"ssh_tofu"`

	// Worker tuning.
	MaxConcurrentActivities int `koanf:"max_concurrent_activities"`
	MaxSessionsPerHost      int `koanf:"max_sessions_per_host"`
	// MaxPooledConnections caps the worker's open SSH connections; 0 sizes
	// the pool from the worker's open-file limit.
	MaxPooledConnections int `koanf:"max_pooled_connections"`
	// IdleConnectionTimeout closes a pooled SSH connection unused for
	// longer; 0 keeps them until the cap or a failure closes them.
	IdleConnectionTimeout time.Duration `koanf:"idle_connection_timeout"`
	// MaxConcurrentDials caps the worker's SSH dials in flight.
	MaxConcurrentDials int `koanf:"max_concurrent_dials"`
	// WorkflowTaskPollers and ActivityTaskPollers are the worker's
	// concurrent long polls per task kind. Each poll brings one task, so
	// they bound how many tasks a worker takes in per round trip to the
	// server: every host op is a few workflow tasks and an activity.
	WorkflowTaskPollers int `koanf:"workflow_task_pollers"`
	ActivityTaskPollers int `koanf:"activity_task_pollers"`
	// WorkflowCacheSize is how many workflows the worker keeps in memory
	// between their tasks (about 100 KB each). One it has evicted is
	// replayed from its whole history at its next task.
	WorkflowCacheSize int `koanf:"workflow_cache_size"`
	// PollerAutoscaling makes those counts a ceiling: an idle worker
	// scales down to 2 and 1 pollers. Off, it keeps them all always.
	PollerAutoscaling bool `koanf:"poller_autoscaling"`
	// MetricsListen is where the worker serves Prometheus /metrics; empty is off.
	MetricsListen string `koanf:"metrics_listen"`
	// ContentStore is the content store starters, the HTTP server and
	// workers share (pushed files and long log tails, by sha256): an
	// s3:// or file:// URL. FilesDir names a directory instead. With
	// neither, a per-user directory (filestore.DefaultDir).
	ContentStore string `koanf:"content_store"`
	FilesDir     string `koanf:"files_dir"`
}

// Store is where the content store is.
func (c Config) Store() (filestore.Location, error) {
	return filestore.Locate(c.ContentStore, c.FilesDir)
}

// HostZone is the supervise_timezone that means each host's own zone.
const HostZone = "host"

// CrontabZone is the zone handed to supervision: empty for each host's own.
func (c Config) CrontabZone() string {
	if c.SuperviseTimeZone == HostZone {
		return ""
	}
	return c.SuperviseTimeZone
}

// WatchQueue is the task queue supervision's watches run on.
func (c Config) WatchQueue() string {
	if c.WatchTaskQueue != "" {
		return c.WatchTaskQueue
	}
	return c.TaskQueue + "-watch"
}

// validZone checks a supervise_timezone the worker can read.
func validZone(z string) error {
	if z == "" || z == HostZone {
		return nil
	}
	if _, ok := policies.FixedZone(z); ok {
		return nil
	}
	if strings.HasPrefix(z, "+") || strings.HasPrefix(z, "-") {
		return fmt.Errorf("not an offset of the form +08:00")
	}
	_, err := time.LoadLocation(z)
	return err
}

// AppConfig is an app allowed to call the HTTP API. Its secret comes from
// an environment variable or a file, never from the config itself.
type AppConfig struct {
	Code       string `koanf:"code"`
	SecretEnv  string `koanf:"secret_env"`
	SecretFile string `koanf:"secret_file"`
	// Namespaces the app may touch; empty allows every namespace.
	Namespaces []string `koanf:"namespaces"`
}

// Secret resolves the app's secret.
func (a AppConfig) Secret() (string, error) {
	switch {
	case a.SecretEnv != "":
		v, ok := os.LookupEnv(a.SecretEnv)
		if !ok || v == "" {
			return "", fmt.Errorf("apps[%s].secret_env: %s is not set", a.Code, a.SecretEnv)
		}
		return v, nil
	case a.SecretFile != "":
		b, err := os.ReadFile(a.SecretFile)
		if err != nil {
			return "", fmt.Errorf("apps[%s].secret_file: %w", a.Code, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", fmt.Errorf("apps[%s]: needs secret_env or secret_file", a.Code)
}

var defaults = map[string]any{
	"temporal_address":   "127.0.0.1:7233",
	"temporal_namespace": "default",
	"grpc_compression":   "none",
	"task_queue":         "drover",
	"inventory":          "./inventory.yaml",
	"log_format":         "text",
	"log_level":          "info",
	"supervise_interval": "10s",
	"limit_polls":        3,
	"supervise_timezone": "host",
	// One watch per supervised host: a worker alone can watch a fleet
	// of 10,000; an idle watch costs a goroutine and a pooled connection.
	"max_concurrent_watches": 10000,
	// Enough for 1,000 hosts at 250 a shard; a small fleet's empty
	// shards cost nothing.
	"watch_shards": 4,
	// 8 sessions per connection leaves room under OpenSSH's default
	// MaxSessions of 10.
	"max_sessions_per_host": 8,
	// 0: as many as the open-file limit allows (policies.PooledConnections),
	// so every host of a large fleet keeps its connection between ops.
	"max_pooled_connections":    0,
	"idle_connection_timeout":   "10m",
	"max_concurrent_dials":      256,
	"max_concurrent_activities": 1000,
	// The SDK's default of 2 each takes in tasks one round trip at a time
	// per poller: an op on hundreds of hosts queued its workflow tasks for
	// seconds behind them.
	"workflow_task_pollers": 16,
	"activity_task_pollers": 16,
	// A worker of 10,000 hosts touches their 10,000 workflows in turn in
	// every fleet op: a cache as small as the SDK's 10,000 evicted each
	// host just before its next task and replayed every one.
	"workflow_cache_size": 20000,
}

// Defaults is the configuration with nothing set: what a worker or starter
// runs with when given no file, environment or flag. Programs that build a
// Config in code (the bench) start from it, so they run drover as shipped.
func Defaults() Config {
	k := koanf.New(".")
	var c Config
	if k.Load(confmap.Provider(defaults, "."), nil) != nil || k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}) != nil {
		panic("config: the defaults do not load")
	}
	return c
}

// DefaultFile is read when --config is not given and it exists.
const DefaultFile = "./drover.yaml"

// AddFlags registers the flags both binaries act on: where Temporal is,
// the inventory, logging, TLS and the payload key.
func AddFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "config file (default ./drover.yaml if present)")
	fs.String("temporal-address", "", "Temporal frontend host:port (env DROVER_TEMPORAL_ADDRESS)")
	fs.String("temporal-namespace", "", "Temporal namespace (env DROVER_TEMPORAL_NAMESPACE)")
	fs.String("task-queue", "", "task queue (env DROVER_TASK_QUEUE)")
	fs.String("inventory", "", "host inventory file (env DROVER_INVENTORY)")
	fs.String("log-format", "", "log format: text or json (env DROVER_LOG_FORMAT)")
	fs.String("log-level", "", "log level: debug, info, warn, error (env DROVER_LOG_LEVEL)")
	fs.String("tls-cert", "", "client certificate for mTLS to Temporal (env DROVER_TLS_CERT)")
	fs.String("tls-key", "", "client key for mTLS to Temporal (env DROVER_TLS_KEY)")
	fs.String("tls-ca", "", "CA bundle for Temporal's server certificate (env DROVER_TLS_CA)")
	fs.String("tls-server-name", "", "server name to verify, when not the address's host (env DROVER_TLS_SERVER_NAME)")
	fs.String("api-key-env", "", "name of the env var holding a Temporal API key (env DROVER_API_KEY_ENV)")
	fs.String("grpc-compression", "", "compression of requests to Temporal: none or gzip (env DROVER_GRPC_COMPRESSION; default none)")
	fs.String("codec-key-file", "", "file holding the payload encryption key (env DROVER_CODEC_KEY_FILE)")
	fs.String("codec-key-env", "", "name of the env var holding the payload encryption key (env DROVER_CODEC_KEY_ENV)")
	fs.String("content-store", "", "content store shared by starters, the HTTP server and workers, for config push and logs: s3://BUCKET?region=... or file:///DIR (env DROVER_CONTENT_STORE; default a directory of this user's)")
	fs.String("files-dir", "", "content store as a directory: the same as --content-store file://DIR (env DROVER_FILES_DIR)")
}

// AddWorkerFlags registers the settings only a worker acts on: how it
// supervises, how many hosts and sessions it holds, host-key trust and
// metrics. The starter leaves them out of its help; a config file or the
// environment still sets them for the worker.
func AddWorkerFlags(fs *pflag.FlagSet) {
	fs.Duration("supervise-interval", 0, "how often supervision polls each host (env DROVER_SUPERVISE_INTERVAL, default 10s)")
	fs.Int("limit-polls", 0, "consecutive polls over a cpu/mem limit before acting (env DROVER_LIMIT_POLLS, default 3)")
	fs.String("supervise-timezone", "", "zone crontab rules are read in: host, UTC, +08:00 or an IANA name (env DROVER_SUPERVISE_TIMEZONE, default host)")
	fs.String("watch-task-queue", "", "task queue of supervision's watches (env DROVER_WATCH_TASK_QUEUE, default <task-queue>-watch)")
	fs.Int("watch-shards", 0, "shard watches supervising the fleet, one per ~250 hosts; 0 is a watch per host (env DROVER_WATCH_SHARDS, default 4)")
	fs.Int("max-concurrent-watches", 0, "hosts one worker watches at once, apart from its activities (env DROVER_MAX_CONCURRENT_WATCHES, default 10000)")
	fs.Bool("ssh-tofu", false, "trust an unknown host's key on first use, recording it in known_hosts (env DROVER_SSH_TOFU; default off)")
	fs.Int("max-concurrent-activities", 0, "activities one worker runs at once (env DROVER_MAX_CONCURRENT_ACTIVITIES, default 1000)")
	fs.Int("max-pooled-connections", 0, "SSH connections one worker keeps open; past it the least recently used idle ones close; 0 sizes it from the open-file limit (env DROVER_MAX_POOLED_CONNECTIONS, default 0)")
	fs.Duration("idle-connection-timeout", 0, "close a pooled SSH connection unused for this long; 0 never does (env DROVER_IDLE_CONNECTION_TIMEOUT, default 10m)")
	fs.Int("max-concurrent-dials", 0, "SSH connections one worker dials at once; more wait their turn (env DROVER_MAX_CONCURRENT_DIALS, default 256)")
	fs.String("metrics-listen", "", "serve Prometheus /metrics on this address, e.g. :9090 (env DROVER_METRICS_LISTEN; default off)")
	fs.Int("max-sessions-per-host", 0, "SSH sessions per pooled host connection (env DROVER_MAX_SESSIONS_PER_HOST, default 8)")
	fs.Int("workflow-cache-size", 0, "workflows one worker keeps in memory between their tasks, about 100 KB each; past it the least recently used are replayed at their next task (env DROVER_WORKFLOW_CACHE_SIZE, default 20000)")
	fs.Int("workflow-task-pollers", 0, "concurrent workflow task polls (env DROVER_WORKFLOW_TASK_POLLERS, default 16; at least 2)")
	fs.Int("activity-task-pollers", 0, "concurrent activity task polls (env DROVER_ACTIVITY_TASK_POLLERS, default 16)")
	fs.Bool("poller-autoscaling", false, "scale an idle worker's pollers down to 2 and 1, the counts above being a ceiling (env DROVER_POLLER_AUTOSCALING; default off)")
}

// Load merges defaults, file, environment and the flags that were set.
func Load(fs *pflag.FlagSet) (Config, error) {
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(defaults, "."), nil); err != nil {
		return Config{}, err
	}
	path := ""
	if fs != nil {
		path, _ = fs.GetString("config")
	}
	if path == "" {
		if _, err := os.Stat(DefaultFile); err == nil {
			path = DefaultFile
		}
	}
	if path != "" {
		if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if err := k.Load(env.Provider("DROVER_", ".", func(s string) string {
		return strings.ToLower(strings.TrimPrefix(s, "DROVER_"))
	}), nil); err != nil {
		return Config{}, err
	}
	if fs != nil {
		// Only flags the operator set override; unset flags keep lower layers.
		if err := k.Load(posflag.ProviderWithFlag(fs, ".", k, func(f *pflag.Flag) (string, any) {
			if !f.Changed || f.Name == "config" {
				return "", nil
			}
			return strings.ReplaceAll(f.Name, "-", "_"), posflag.FlagVal(fs, f)
		}), nil); err != nil {
			return Config{}, err
		}
	}
	var c Config
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return Config{}, err
	}
	return c, c.validate()
}

func (c Config) validate() error {
	if c.TemporalAddress == "" {
		return fmt.Errorf("temporal_address: must not be empty")
	}
	if c.TaskQueue == "" {
		return fmt.Errorf("task_queue: must not be empty")
	}
	if c.SuperviseInterval < time.Second {
		return fmt.Errorf("supervise_interval %s: must be at least 1s", c.SuperviseInterval)
	}
	if err := atLeast("limit_polls", c.LimitPolls, 1); err != nil {
		return err
	}
	if err := validZone(c.SuperviseTimeZone); err != nil {
		return fmt.Errorf("supervise_timezone %q: %v (give host, UTC, an offset like +08:00, or an IANA name like Asia/Shanghai)", c.SuperviseTimeZone, err)
	}
	if c.WatchShards < 0 {
		return fmt.Errorf("watch_shards %d: must be 0 (a watch per host) or more", c.WatchShards)
	}
	if err := atLeast("max_concurrent_watches", c.MaxConcurrentWatches, 1); err != nil {
		return err
	}
	if c.WatchQueue() == c.TaskQueue {
		return fmt.Errorf("watch_task_queue %q: must differ from task_queue, or ops wait behind watches", c.WatchTaskQueue)
	}
	if c.WatchQueue() == policies.TasksQueue(c.TaskQueue) {
		return fmt.Errorf("watch_task_queue %q: must differ from %s, the queue of task_queue's tasks, or tasks wait behind watches", c.WatchTaskQueue, policies.TasksQueue(c.TaskQueue))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("tls_cert and tls_key: give both or neither")
	}
	if c.GRPCCompression != "none" && c.GRPCCompression != "gzip" {
		return fmt.Errorf("grpc_compression %q: must be none or gzip", c.GRPCCompression)
	}
	// The worker's pools and pollers, checked in this order.
	for _, err := range []error{
		atLeast("max_sessions_per_host", c.MaxSessionsPerHost, 1),
		atLeast("max_pooled_connections", c.MaxPooledConnections, 0),
		atLeast("max_concurrent_dials", c.MaxConcurrentDials, 1),
		must(c.IdleConnectionTimeout >= 0, "idle_connection_timeout %s: must not be negative (0 never closes)", c.IdleConnectionTimeout),
		atLeast("max_concurrent_activities", c.MaxConcurrentActivities, 1),
		// One poller cannot serve both the sticky and the shared queue.
		atLeast("workflow_task_pollers", c.WorkflowTaskPollers, 2),
		atLeast("workflow_cache_size", c.WorkflowCacheSize, 1),
		atLeast("activity_task_pollers", c.ActivityTaskPollers, 1),
	} {
		if err != nil {
			return err
		}
	}
	if err := c.validateCodec(); err != nil {
		return err
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("log_format %q: must be text or json", c.LogFormat)
	}
	if _, err := c.level(); err != nil {
		return err
	}
	if c.ContentStore != "" || c.FilesDir != "" {
		// The default is found when the store is opened: a worker
		// that does no file ops starts without one.
		if _, err := c.Store(); err != nil {
			return err
		}
	}
	return nil
}

// atLeast refuses a count setting, named as the config file names it,
// below least.
func atLeast(name string, v, least int) error {
	return must(v >= least, "%s %d: must be at least %d", name, v, least)
}

// must is nil when ok holds, else the error format and args describe.
func must(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}

// level is log_level as slog reads it; a name slog does not know (a typo
// such as inf0) is refused rather than read as info.
func (c Config) level() (slog.Level, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return 0, fmt.Errorf("log_level %q: must be debug, info, warn or error", c.LogLevel)
	}
	return lvl, nil
}

func (c Config) validateCodec() error {
	if c.CodecKeyFile != "" && c.CodecKeyEnv != "" {
		return fmt.Errorf("codec_key_file and codec_key_env: give one, not both")
	}
	if len(c.CodecOldKeyFiles) > 0 && c.CodecKeyFile == "" && c.CodecKeyEnv == "" {
		return fmt.Errorf("codec_old_key_files: needs a current key (codec_key_file or codec_key_env)")
	}
	return nil
}

// Logger builds the slog logger the settings ask for, writing to stderr.
func (c Config) Logger() *slog.Logger {
	lvl, _ := c.level() // checked by Load
	opts := &slog.HandlerOptions{Level: lvl}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
