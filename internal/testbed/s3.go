package testbed

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// S3 is a real S3-compatible server, `rclone serve s3` over a local
// directory, on 127.0.0.1. Each directory under Root is a bucket.
type S3 struct {
	// Endpoint is http://127.0.0.1:PORT.
	Endpoint string
	Root     string
	// AccessKey and SecretKey are the only credentials it accepts.
	AccessKey, SecretKey string
	cmd                  *exec.Cmd
	done                 chan struct{}
}

// RcloneBinary is where the rclone built for the tests lives:
// $DROVER_RCLONE_BIN, else bin/rclone at the module root (make bin/rclone).
func RcloneBinary() string {
	if p := os.Getenv("DROVER_RCLONE_BIN"); p != "" {
		return p
	}
	return filepath.Join(ModuleRoot(), "bin", "rclone")
}

// NewS3 starts the server with the given buckets and stops it, by its
// process group, in cleanup.
func NewS3(tb testing.TB, buckets ...string) *S3 {
	tb.Helper()
	bin := RcloneBinary()
	if _, err := os.Stat(bin); err != nil {
		tb.Fatalf("rclone not found at %s (run `make bin/rclone`): %v", bin, err)
	}
	s := &S3{Root: tb.TempDir(), AccessKey: "drover-test-access", SecretKey: "drover-test-secret"}
	for _, b := range buckets {
		if err := os.Mkdir(filepath.Join(s.Root, b), 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	port, err := FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s.Endpoint = "http://" + addr
	s.cmd = exec.Command(bin, "serve", "s3", "--addr", addr, "--auth-key", s.AccessKey+","+s.SecretKey,
		"--config", "/dev/null", "--log-file", filepath.Join(tb.TempDir(), "rclone.log"), s.Root)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		tb.Fatalf("start rclone serve s3: %v", err)
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	tb.Cleanup(s.Stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return s
		}
		select {
		case <-s.done:
			tb.Fatalf("rclone serve s3 exited during start-up")
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("rclone serve s3 on %s not listening after 30s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the port
	}
}

// URL is a content_store URL for bucket on this server.
func (s *S3) URL(bucket string) string {
	return fmt.Sprintf("s3://%s?endpoint=%s&region=us-east-1&use_path_style=true", bucket, s.Endpoint)
}

// Stop ends the server: SIGTERM to its process group, SIGKILL after 10 s.
func (s *S3) Stop() {
	stopGroup(s.cmd, s.done, syscall.SIGTERM, 10*time.Second)
}
