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
	// LimitPolls is how many consecutive polls over a cpu/mem limit act.
	LimitPolls int `koanf:"limit_polls"`
	// Apps may call the HTTP API.
	Apps []AppConfig `koanf:"apps"`
}

// AppConfig is an app allowed to call the HTTP API. Its secret comes from
// an environment variable or a file, never from the config itself.
type AppConfig struct {
	Code       string `koanf:"code"`
	SecretEnv  string `koanf:"secret_env"`
	SecretFile string `koanf:"secret_file"`
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
	"task_queue":         "drover",
	"inventory":          "./inventory.yaml",
	"log_format":         "text",
	"log_level":          "info",
	"supervise_interval": "10s",
	"limit_polls":        3,
}

// DefaultFile is read when --config is not given and it exists.
const DefaultFile = "./drover.yaml"

// AddFlags registers the shared flags on a flag set.
func AddFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "config file (default ./drover.yaml if present)")
	fs.String("temporal-address", "", "Temporal frontend host:port (env DROVER_TEMPORAL_ADDRESS)")
	fs.String("temporal-namespace", "", "Temporal namespace (env DROVER_TEMPORAL_NAMESPACE)")
	fs.String("task-queue", "", "task queue (env DROVER_TASK_QUEUE)")
	fs.String("inventory", "", "host inventory file (env DROVER_INVENTORY)")
	fs.String("log-format", "", "log format: text or json (env DROVER_LOG_FORMAT)")
	fs.String("log-level", "", "log level: debug, info, warn, error (env DROVER_LOG_LEVEL)")
	fs.Duration("supervise-interval", 0, "how often supervision polls each host (env DROVER_SUPERVISE_INTERVAL, default 10s)")
	fs.Int("limit-polls", 0, "consecutive polls over a cpu/mem limit before acting (env DROVER_LIMIT_POLLS, default 3)")
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
	if c.LimitPolls < 1 {
		return fmt.Errorf("limit_polls %d: must be at least 1", c.LimitPolls)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("log_format %q: must be text or json", c.LogFormat)
	}
	return nil
}

// Logger builds the slog logger the settings ask for, writing to stderr.
func (c Config) Logger() *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
