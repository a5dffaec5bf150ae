package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/spf13/pflag"
)

func TestLoadLayers(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "drover.yaml")
	if err := os.WriteFile(file, []byte("task_queue: from-file\ninventory: /from/file\nsupervise_interval: 5s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DROVER_INVENTORY", "/from/env")
	t.Setenv("DROVER_TEMPORAL_NAMESPACE", "ns-env")
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddFlags(fs)
	AddWorkerFlags(fs)
	if err := fs.Parse([]string{"--config", file, "--temporal-namespace", "ns-flag"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(fs)
	if err != nil {
		t.Fatal(err)
	}
	if c.TaskQueue != "from-file" || c.Inventory != "/from/env" || c.TemporalNamespace != "ns-flag" ||
		c.TemporalAddress != "127.0.0.1:7233" || c.SuperviseInterval != 5*time.Second || c.MaxSessionsPerHost != 8 || c.MaxPooledConnections != 0 ||
		c.IdleConnectionTimeout != 10*time.Minute || c.MaxConcurrentDials != 256 ||
		c.WorkflowTaskPollers != 16 || c.ActivityTaskPollers != 16 || c.WorkflowCacheSize != 20000 {
		t.Fatalf("layers: %+v", c)
	}
}

func TestLoadRejects(t *testing.T) {
	for _, bad := range []string{"log_format: xml", "supervise_interval: 10ms", "limit_polls: 0", "tls_cert: /a", "max_sessions_per_host: 0", "max_pooled_connections: -1", "idle_connection_timeout: -1s", "max_concurrent_dials: 0",
		"workflow_task_pollers: 1", "activity_task_pollers: 0", "workflow_cache_size: 0",
		"supervise_timezone: Mars/Olympus", "supervise_timezone: +8", "max_concurrent_watches: 0", "watch_task_queue: drover", "watch_task_queue: drover-tasks", "grpc_compression: zstd"} {
		file := filepath.Join(t.TempDir(), "drover.yaml")
		if err := os.WriteFile(file, []byte(bad+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		AddFlags(fs)
		AddWorkerFlags(fs)
		_ = fs.Parse([]string{"--config", file})
		key := strings.SplitN(bad, ":", 2)[0]
		if _, err := Load(fs); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: error %v should name %s", bad, err, key)
		}
	}
}

// TestGRPCCompressionNoneByDefault: requests to Temporal go uncompressed
// unless gzip is asked for.
func TestGRPCCompressionNoneByDefault(t *testing.T) {
	c := Defaults()
	opts, err := c.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := opts.ConnectionOptions.GrpcCompression.(*client.GrpcCompressionNone); !ok {
		t.Fatalf("default compression %T, want none", opts.ConnectionOptions.GrpcCompression)
	}
	c.GRPCCompression = "gzip"
	if opts, err = c.ClientOptions(); err != nil || opts.ConnectionOptions.GrpcCompression != nil {
		t.Fatalf("gzip: %T %v, want the SDK's default (gzip)", opts.ConnectionOptions.GrpcCompression, err)
	}
}

func TestClientOptionsTLSAndAPIKey(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	c := Config{TemporalAddress: "temporal.example.internal:7233", TemporalNamespace: "prod",
		TLSCert: cert, TLSKey: key, TLSCA: cert, APIKeyEnv: "DROVER_TEST_API_KEY"}
	if _, err := c.ClientOptions(); err == nil || !strings.Contains(err.Error(), "DROVER_TEST_API_KEY") {
		t.Fatalf("an unset API key env must be an error naming it: %v", err)
	}
	t.Setenv("DROVER_TEST_API_KEY", "k-123")
	opts, err := c.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	tc := opts.ConnectionOptions.TLS
	if tc == nil || len(tc.Certificates) != 1 || tc.RootCAs == nil || tc.ServerName != "temporal.example.internal" || opts.Credentials == nil {
		t.Fatalf("options %+v", opts)
	}
	plain, err := Config{TemporalAddress: "127.0.0.1:7233"}.ClientOptions()
	if err != nil || plain.ConnectionOptions.TLS != nil || plain.Credentials != nil {
		t.Fatalf("no TLS settings must mean a plain connection: %+v %v", plain, err)
	}
	if _, err := (Config{TLSCA: filepath.Join(dir, "missing.pem")}).ClientOptions(); err == nil {
		t.Fatal("a missing CA file must be an error")
	}
}

func writeSelfSigned(t *testing.T, dir string) (string, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "drover-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_ = os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	_ = os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, key
}

func TestClientOptionsCodec(t *testing.T) {
	dir := t.TempDir()
	cur, old := filepath.Join(dir, "current.key"), filepath.Join(dir, "old.key")
	const curKey = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=" // 32 bytes of 1
	if err := os.WriteFile(cur, []byte(curKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte(strings.Repeat("02", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "drover.yaml")
	if err := os.WriteFile(file, []byte("codec_key_file: "+cur+"\ncodec_old_key_files: ["+old+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddFlags(fs)
	AddWorkerFlags(fs)
	if err := fs.Parse([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(fs)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := c.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.DataConverter == nil || opts.FailureConverter == nil {
		t.Fatal("codec key set, but no encrypting converters")
	}
	p, err := opts.DataConverter.ToPayload("plaintext-marker")
	if err != nil || strings.Contains(string(p.Data), "plaintext-marker") {
		t.Fatalf("payload not encrypted: %v %q", err, p.GetData())
	}
	var back string
	if err := opts.DataConverter.FromPayload(p, &back); err != nil || back != "plaintext-marker" {
		t.Fatalf("round trip: %q %v", back, err)
	}

	if opts, _ := (Config{TemporalAddress: "x:1"}).ClientOptions(); opts.DataConverter != nil {
		t.Fatal("no key, yet a converter")
	}
	// A bad key is refused naming the setting, never echoing the key.
	t.Setenv("DROVER_TEST_BAD_KEY", "not-a-key-but-secret-text")
	_, err = (Config{TemporalAddress: "x:1", CodecKeyEnv: "DROVER_TEST_BAD_KEY"}).ClientOptions()
	if err == nil || !strings.Contains(err.Error(), "codec_key_env") || strings.Contains(err.Error(), "secret-text") {
		t.Fatalf("bad key: %v", err)
	}
	if err := (Config{CodecKeyFile: cur, CodecKeyEnv: "X"}).validateCodec(); err == nil {
		t.Fatal("both key sources accepted")
	}
}

func TestSSHTOFUOffByDefault(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./drover.yaml
	c, err := Load(nil)
	if err != nil || c.SSHTOFU {
		t.Fatalf("default: tofu=%v %v", c.SSHTOFU, err)
	}
	t.Setenv("DROVER_SSH_TOFU", "true")
	if c, err := Load(nil); err != nil || !c.SSHTOFU {
		t.Fatalf("DROVER_SSH_TOFU=true: tofu=%v %v", c.SSHTOFU, err)
	}
}

// TestSupervisionSettings: watches get a queue of their own by default,
// and supervise_timezone means each host's own zone unless set.
func TestSupervisionSettings(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./drover.yaml
	c, err := Load(nil)
	if err != nil || c.WatchQueue() != "drover-watch" || c.CrontabZone() != "" || c.MaxConcurrentWatches != 10000 {
		t.Fatalf("defaults: queue %q zone %q watches %d (%v)", c.WatchQueue(), c.CrontabZone(), c.MaxConcurrentWatches, err)
	}
	t.Setenv("DROVER_SUPERVISE_TIMEZONE", "Asia/Shanghai")
	t.Setenv("DROVER_WATCH_TASK_QUEUE", "watches")
	if c, err := Load(nil); err != nil || c.CrontabZone() != "Asia/Shanghai" || c.WatchQueue() != "watches" {
		t.Fatalf("set: zone %q queue %q (%v)", c.CrontabZone(), c.WatchQueue(), err)
	}
}

// A typo in log_level is refused with the field named, as one in
// log_format is, rather than read as info.
func TestLogLevelTypoRefused(t *testing.T) {
	t.Setenv("DROVER_LOG_LEVEL", "inf0")
	_, err := Load(nil)
	if err == nil || !strings.Contains(err.Error(), `log_level "inf0"`) || !strings.Contains(err.Error(), "debug, info, warn or error") {
		t.Fatalf("DROVER_LOG_LEVEL=inf0: %v", err)
	}
	for _, ok := range []string{"debug", "INFO", "warn", "error"} {
		t.Setenv("DROVER_LOG_LEVEL", ok)
		if _, err := Load(nil); err != nil {
			t.Errorf("log_level %s: %v", ok, err)
		}
	}
}

// Where the content store is: the per-user default, a files_dir, or a
// content_store URL; both at once, or a URL with credentials, is refused.
func TestContentStoreSettings(t *testing.T) {
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	c, err := Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := c.Store(); err != nil || l.Dir != filepath.Join(data, "drover", "content") {
		t.Fatalf("default store: %+v %v", l, err)
	}
	t.Setenv("DROVER_CONTENT_STORE", "s3://drover?region=us-east-1")
	if c, err = Load(nil); err != nil {
		t.Fatal(err)
	}
	if l, _ := c.Store(); l.URL != "s3://drover?region=us-east-1" {
		t.Fatalf("content_store: %+v", l)
	}
	t.Setenv("DROVER_FILES_DIR", "/srv/drover")
	if _, err := Load(nil); err == nil || !strings.Contains(err.Error(), "content_store and files_dir") {
		t.Fatalf("both set: %v", err)
	}
	t.Setenv("DROVER_FILES_DIR", "")
	t.Setenv("DROVER_CONTENT_STORE", "s3://AKIA:secret@drover")
	if _, err := Load(nil); err == nil || !strings.Contains(err.Error(), "must not hold credentials") || strings.Contains(err.Error(), "secret@") {
		t.Fatalf("credentials in the URL: %v", err)
	}
}

// TestDefaultsAreWhatLoadGives: a Config built from Defaults runs as a
// worker given nothing runs, shard watches and all.
func TestDefaultsAreWhatLoadGives(t *testing.T) {
	t.Chdir(t.TempDir())
	loaded, err := Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := Defaults(); !reflect.DeepEqual(d, loaded) || d.WatchShards != 4 {
		t.Fatalf("Defaults() = %+v\nLoad(nil) = %+v", d, loaded)
	}
}
