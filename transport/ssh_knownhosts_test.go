package transport

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestHostKeyChanged(t *testing.T) {
	bed, hosts := newBed(t, 1)
	if err := bed.Hosts[0].RotateHostKey(); err != nil {
		t.Fatal(err)
	}
	s := newSSH(t, bed.KnownHostsPath)
	_, err := s.Run(context.Background(), hosts[0], Command{Script: "touch /data/hostkey-ran"})
	wantKind(t, err, KindHostKey)
	if !strings.Contains(err.Error(), "host key changed") || !strings.Contains(err.Error(), "MITM") {
		t.Errorf("message: %v", err)
	}
	if out := hostExec(t, bed.Hosts[0], "ls /data"); strings.Contains(out, "hostkey-ran") {
		t.Fatal("a command ran on a host whose key changed")
	}
}

func TestHostKeyUnknown(t *testing.T) {
	bed, hosts := newBed(t, 2)
	// known_hosts that lists only the other host.
	data, err := os.ReadFile(bed.KnownHostsPath)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" && !strings.HasPrefix(line, hosts[0].IP+" ") {
			keep = append(keep, line)
		}
	}
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, []byte(strings.Join(keep, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newSSH(t, known)
	run(t, s, hosts[1], Command{Script: "true"})
	_, err = s.Run(context.Background(), hosts[0], Command{Script: "touch /data/unknown-ran"})
	wantKind(t, err, KindHostKey)
	if !strings.Contains(err.Error(), "host key unknown") || !strings.Contains(err.Error(), known) {
		t.Errorf("message: %v", err)
	}
	if out := hostExec(t, bed.Hosts[0], "ls /data"); strings.Contains(out, "unknown-ran") {
		t.Fatal("a command ran on an unknown host")
	}

	// Adding the host to known_hosts is picked up without a restart.
	if err := os.WriteFile(known, data, 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	os.Chtimes(known, future, future) // the rewrite may share the old mtime
	run(t, s, hosts[0], Command{Script: "true"})
}

func TestTrustOnFirstUse(t *testing.T) {
	bed, hosts := newBed(t, 1)
	known := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(known, []byte("# no hosts yet"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Off by default: the unknown host is refused and nothing is recorded.
	_, err := newSSH(t, known).Run(context.Background(), hosts[0], Command{Script: "touch /data/tofu-off-ran"})
	wantKind(t, err, KindHostKey)
	if b, _ := os.ReadFile(known); string(b) != "# no hosts yet" {
		t.Fatalf("known_hosts changed with trust on first use off: %q", b)
	}

	var trusted []string
	s := newSSH(t, known, func(o *SSHOptions) {
		o.TrustOnFirstUse = true
		o.OnTrust = func(addr, fp string) { trusted = append(trusted, addr+" "+fp) }
	})
	run(t, s, hosts[0], Command{Script: "true"})
	want := ssh.FingerprintSHA256(bed.Hosts[0].PublicKey())
	if len(trusted) != 1 || !strings.HasSuffix(trusted[0], want) {
		t.Fatalf("trusted %v, want one with %s", trusted, want)
	}
	// The recorded key is the host's, read back by a transport without TOFU.
	run(t, newSSH(t, known), hosts[0], Command{Script: "true"})
	if b, _ := os.ReadFile(known); !strings.HasPrefix(string(b), "# no hosts yet\n") || strings.Count(string(b), "\n") != 2 {
		t.Fatalf("known_hosts: %q", b)
	}

	// A changed key is never trusted, and no command is sent.
	if err := bed.Hosts[0].RotateHostKey(); err != nil {
		t.Fatal(err)
	}
	s2 := newSSH(t, known, func(o *SSHOptions) { o.TrustOnFirstUse = true })
	_, err = s2.Run(context.Background(), hosts[0], Command{Script: "touch /data/tofu-changed-ran"})
	wantKind(t, err, KindHostKey)
	if !strings.Contains(err.Error(), "host key changed") {
		t.Errorf("message: %v", err)
	}
	if out := hostExec(t, bed.Hosts[0], "ls /data"); strings.Contains(out, "ran") {
		t.Fatalf("a command ran on a refused host: %s", out)
	}
}
