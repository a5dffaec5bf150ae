package inventory

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
)

// syncBuffer is a log destination safe for the watcher's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func hostsDoc(ips ...string) string {
	doc := "known_hosts: known_hosts\nhosts:\n"
	for _, ip := range ips {
		doc += "  - {ip: " + ip + "}\n"
	}
	return doc
}

// replaceFile writes as editors and generators do: a new file renamed over
// the old one.
func replaceFile(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 10 s", what)
}

// TestLiveFollowsTheFile: an edit is seen without a restart, whether
// written in place or renamed over the file; a broken file keeps the last
// good inventory and the log names the file and the field; an edited
// source file is seen too.
func TestLiveFollowsTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(path, []byte(hostsDoc("10.0.0.1")), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	live := NewLive(path, inv, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live.Watch(ctx)
	has := func(ip string) bool { _, ok := inv.Lookup(proc.HostID{IP: ip}); return ok }

	if err := os.WriteFile(path, []byte(hostsDoc("10.0.0.1", "10.0.0.2")), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a host added in place", func() bool { return has("10.0.0.2") })
	replaceFile(t, path, hostsDoc("10.0.0.2"))
	eventually(t, "a host removed by a rename", func() bool { return !has("10.0.0.1") })
	if !strings.Contains(logs.String(), "added=0 removed=1 changed=0") {
		t.Fatalf("the reload's log: %s", logs.String())
	}

	replaceFile(t, path, hostsDoc("10.0.0.2")+"  - {ip: 10.0.0.3, port: 0x}\n")
	eventually(t, "the refusal logged", func() bool {
		return strings.Contains(logs.String(), "inventory not reloaded: the last good inventory stays in use")
	})
	if out := logs.String(); !strings.Contains(out, path) || !strings.Contains(out, "hosts[1].port") {
		t.Fatalf("the refusal names neither the file nor the field: %s", out)
	}
	if !has("10.0.0.2") || has("10.0.0.3") || len(inv.Hosts()) != 1 {
		t.Fatalf("after a broken file: %v", names(inv.Hosts()))
	}

	// A source named by the fixed file is watched from then on.
	src := filepath.Join(dir, "cmdb.json")
	if err := os.WriteFile(src, []byte(`[{"bk_cloud_id":0,"bk_host_innerip":"10.0.0.7"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	replaceFile(t, path, hostsDoc("10.0.0.2")+"sources: [{format: cmdb, file: cmdb.json}]\n")
	eventually(t, "the source read", func() bool { return has("10.0.0.7") })
	replaceFile(t, src, `[{"bk_cloud_id":0,"bk_host_innerip":"10.0.0.8"}]`)
	eventually(t, "the source's edit seen", func() bool { return has("10.0.0.8") && !has("10.0.0.7") })
}

// TestLiveReload: Reload (SIGHUP) reloads an unchanged file too, and
// hands it to apply; apply's refusal keeps the last good inventory.
func TestLiveReload(t *testing.T) {
	inv, dir, err := load(t, hostsDoc("10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "inventory.yaml")
	var logs syncBuffer
	var applied []string
	refuse := false
	live := NewLive(path, inv, slog.New(slog.NewTextHandler(&logs, nil)), func(next *Inventory) error {
		if refuse {
			return errors.New("known_hosts: no such file")
		}
		applied = append(applied, next.KnownHosts())
		return nil
	})
	if err := live.Reload(); err != nil || len(applied) != 1 || applied[0] != filepath.Join(dir, "known_hosts") {
		t.Fatalf("reload: %v, applied %v", err, applied)
	}
	if !strings.Contains(logs.String(), `msg="inventory reloaded"`) || !strings.Contains(logs.String(), "reason=signal") {
		t.Fatalf("log: %s", logs.String())
	}
	refuse = true
	replaceFile(t, path, hostsDoc("10.0.0.2"))
	if err := live.Reload(); err == nil || names(inv.Hosts()) != "10.0.0.1" {
		t.Fatalf("a refused inventory was swapped in: %v %s", err, names(inv.Hosts()))
	}
}

// TestRelevantEvents: events on the watched files count, and so does the
// swap of a Kubernetes ConfigMap's ..data link beside them; others in the
// same directories do not.
func TestRelevantEvents(t *testing.T) {
	files := map[string]bool{"/etc/drover/inventory.yaml": true, "/srv/lists/cmdb.json": true}
	for name, want := range map[string]bool{
		"/etc/drover/inventory.yaml":     true,
		"/etc/drover/./inventory.yaml":   true,
		"/srv/lists/cmdb.json":           true,
		"/etc/drover/..data":             true,
		"/etc/drover/..data_tmp":         true,
		"/etc/drover/known_hosts":        false,
		"/etc/drover/inventory.yaml.new": false,
		"/srv/other/..data":              false,
	} {
		if got := relevant(name, files); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}
