package transport

import (
	"context"
	"os"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/inventory"
)

// newCertBed starts hosts that serve CA-signed host keys and trust the
// bed's user CA.
func newCertBed(t *testing.T, n int) (*testbed.Bed, []inventory.Host) {
	t.Helper()
	bed := testbed.New(t, testbed.Options{Hosts: n, Certificates: true})
	inv, err := inventory.Load(bed.InventoryPath)
	if err != nil {
		t.Fatal(err)
	}
	return bed, inv.Hosts()
}

// caKnownHosts is a known_hosts file whose only trust is the bed's host CA,
// for every address, plus extra lines.
func caKnownHosts(t *testing.T, bed *testbed.Bed, extra ...string) string {
	t.Helper()
	return knownHostsFile(t, append([]string{"@cert-authority * " + authorizedLine(bed.HostCA())}, extra...)...)
}

// TestHostCertificateOverSSH: a host whose only known_hosts entry is its
// CA is reached, and one whose certificate has expired, or whose key is
// revoked, is refused before any command is sent.
func TestHostCertificateOverSSH(t *testing.T) {
	bed, hosts := newCertBed(t, 1)
	h, host := hosts[0], bed.Hosts[0]
	known := caKnownHosts(t, bed)
	if got := string(run(t, newSSH(t, known), h, Command{Script: "echo ok"}).Stdout); got != "ok\n" {
		t.Fatalf("through the host CA: %q", got)
	}

	refused := func(known, want string) {
		t.Helper()
		_, err := newSSH(t, known).Run(context.Background(), h, Command{Script: "touch /data/cert-ran"})
		wantKind(t, err, KindHostKey)
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q, want %q", err, want)
		}
		if out := hostExec(t, host, "ls /data"); strings.Contains(out, "cert-ran") {
			t.Fatal("a command ran on a refused host")
		}
	}
	if err := host.SignHostKey("-2h:-1h", ""); err != nil {
		t.Fatal(err)
	}
	cert, err := host.HostCertificate()
	if err != nil {
		t.Fatal(err)
	}
	window := "has expired (valid from " + certTime(cert.ValidAfter, "") + " to " + certTime(cert.ValidBefore, "")
	refused(known, window)

	if err := host.SignHostKey("-5m:+1h", "10.9.9.9"); err != nil {
		t.Fatal(err)
	}
	refused(known, `principal "`+h.IP+`" not in the set`)

	if err := host.SignHostKey("-5m:+1h", ""); err != nil {
		t.Fatal(err)
	}
	run(t, newSSH(t, known), h, Command{Script: "true"})
	refused(caKnownHosts(t, bed, "@revoked * "+authorizedLine(host.PublicKey())), "is revoked: its key is listed @revoked at")
}

// TestUserCertificateOverSSH logs in with a key no host authorizes, by its
// certificate from the user CA sshd trusts: beside the key or named by
// certificate_file, refused expired or revoked, used again once renewed,
// while an open connection keeps its login.
func TestUserCertificateOverSSH(t *testing.T) {
	bed, hosts := newCertBed(t, 1)
	host := bed.Hosts[0]
	h := hosts[0]
	h.IdentityFile = writeKey(t)
	pub := parseKeyFile(t, h.IdentityFile).PublicKey()
	beside := h.IdentityFile + "-cert.pub"
	sign := func(path, validity string) *ssh.Certificate {
		t.Helper()
		if err := bed.SignUserKey(pub, path, "root", validity); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		k, _, _, _, err := ssh.ParseAuthorizedKey(data)
		if err != nil {
			t.Fatal(err)
		}
		return k.(*ssh.Certificate)
	}
	sshdLog := func() string {
		b, err := os.ReadFile(host.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	s := newSSH(t, bed.KnownHostsPath)
	_, err := s.Run(context.Background(), h, Command{Script: "true"})
	wantKind(t, err, KindAuth) // the key alone is not authorized

	sign(beside, "-5m:+1h")
	if got := string(run(t, s, h, Command{Script: "id -un"}).Stdout); got != "root\n" {
		t.Fatalf("login by certificate: %q", got)
	}
	if log := sshdLog(); !strings.Contains(log, "ED25519-CERT") || !strings.Contains(log, "ID user-root") {
		t.Fatalf("sshd did not log a certificate login:\n%s", log)
	}

	// An expired certificate fails the next dial before connecting; the
	// connection already open keeps its login.
	expired := sign(beside, "-2h:-1h")
	handshakes := s.Stats().Handshakes
	run(t, s, h, Command{Script: "true"})
	if st := s.Stats(); st.Handshakes != handshakes {
		t.Fatalf("pooled connection not reused: %+v", st)
	}
	connections := strings.Count(sshdLog(), "Connection from")
	fresh := newSSH(t, bed.KnownHostsPath)
	_, err = fresh.Run(context.Background(), h, Command{Script: "true"})
	wantKind(t, err, KindAuth)
	for _, want := range []string{h.DialAddress(), "has expired", "valid from " + certTime(expired.ValidAfter, "") + " to " + certTime(expired.ValidBefore, "")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if n := strings.Count(sshdLog(), "Connection from"); n != connections {
		t.Errorf("an expired certificate still connected to sshd (%d -> %d connections)", connections, n)
	}

	// Renewed on disk, it is used from the next dial, with no restart.
	sign(beside, "-5m:+1h")
	run(t, fresh, h, Command{Script: "true"})

	// certificate_file names one kept elsewhere.
	if err := os.Remove(beside); err != nil {
		t.Fatal(err)
	}
	named := h
	named.CertificateFile = t.TempDir() + "/issued-cert.pub"
	sign(named.CertificateFile, "-5m:+1h")
	run(t, newSSH(t, bed.KnownHostsPath), named, Command{Script: "true"})

	// A revoked key is refused by sshd, certificate and all.
	if err := bed.RevokeKey(pub); err != nil {
		t.Fatal(err)
	}
	_, err = newSSH(t, bed.KnownHostsPath).Run(context.Background(), named, Command{Script: "true"})
	wantKind(t, err, KindAuth)
	if log := sshdLog(); !strings.Contains(log, "revoked") {
		t.Fatalf("sshd did not refuse a revoked key:\n%s", log)
	}
}
