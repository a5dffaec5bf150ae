package testbed

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// TestCertificates checks what a bed with Certificates serves and accepts,
// with x/crypto's own certificate checks and no drover code: the host's
// certificate, a user certificate in place of an authorized key, and a
// revoked key.
func TestCertificates(t *testing.T) {
	t.Parallel()
	b := New(t, Options{Hosts: 1, Certificates: true})
	h := b.Hosts[0]
	cert, err := h.HostCertificate()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cert.Key.Marshal(), h.PublicKey().Marshal()) || cert.CertType != ssh.HostCert ||
		len(cert.ValidPrincipals) != 1 || cert.ValidPrincipals[0] != h.IP {
		t.Fatalf("host certificate: key %v type %d principals %v", cert.Key.Type(), cert.CertType, cert.ValidPrincipals)
	}

	priv, pub, _, err := newKey()
	if err != nil {
		t.Fatal(err)
	}
	plain, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	certPath := filepath.Join(t.TempDir(), "id-cert.pub")
	if err := b.SignUserKey(pub, certPath, "root", "-5m:+1h"); err != nil {
		t.Fatal(err)
	}
	userCert, err := readCertificate(certPath)
	if err != nil {
		t.Fatal(err)
	}
	certSigner, err := ssh.NewCertSigner(userCert, plain)
	if err != nil {
		t.Fatal(err)
	}
	checker := &ssh.CertChecker{IsHostAuthority: func(ca ssh.PublicKey, _ string) bool {
		return bytes.Equal(ca.Marshal(), b.HostCA().Marshal())
	}}
	login := func(signer ssh.Signer) error {
		c, err := dialWith(h, &ssh.ClientConfig{
			User:              "root",
			Auth:              []ssh.AuthMethod{ssh.PublicKeys(signer)},
			HostKeyCallback:   checker.CheckHostKey,
			HostKeyAlgorithms: []string{ssh.CertAlgoED25519v01},
		}, 10*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := login(certSigner); err != nil {
		t.Fatalf("certificate login: %v", err)
	}
	if err := login(plain); err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("the certificate's key alone, never authorized: %v", err)
	}

	// A host key signed again for another window is served after the
	// restart.
	if err := h.SignHostKey("-2h:-1h", ""); err != nil {
		t.Fatal(err)
	}
	if err := login(certSigner); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired host certificate: %v", err)
	}
	if err := h.SignHostKey("-5m:+1h", ""); err != nil {
		t.Fatal(err)
	}

	if err := b.RevokeKey(pub); err != nil {
		t.Fatal(err)
	}
	if err := login(certSigner); err == nil {
		t.Fatal("a certificate of a revoked key logged in")
	}
	if log, _ := os.ReadFile(h.LogPath()); !strings.Contains(string(log), "revoked") {
		t.Fatalf("sshd did not log the revocation:\n%s", log)
	}
}
