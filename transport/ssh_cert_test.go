package transport

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// newSigner makes an ed25519 key in memory.
func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// certify signs key with ca, valid over [from, to).
func certify(t *testing.T, ca ssh.Signer, key ssh.PublicKey, typ uint32, principals []string, from, to time.Time) *ssh.Certificate {
	t.Helper()
	c := &ssh.Certificate{Key: key, CertType: typ, KeyId: "test-cert", Serial: 7, ValidPrincipals: principals,
		ValidAfter: uint64(from.Unix()), ValidBefore: uint64(to.Unix())}
	if err := c.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	return c
}

func knownHostsFile(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func authorizedLine(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

// TestHostCertificateChecks runs each way a host certificate can be
// presented through the known_hosts check, with certificates signed here.
func TestHostCertificateChecks(t *testing.T) {
	const addr = "10.1.2.3:22"
	ca, otherCA, hostKey := newSigner(t), newSigner(t), newSigner(t).PublicKey()
	now := time.Now()
	valid := func(signer ssh.Signer, principals ...string) *ssh.Certificate {
		return certify(t, signer, hostKey, ssh.HostCert, principals, now.Add(-time.Hour), now.Add(time.Hour))
	}
	caLine := "@cert-authority 10.1.2.* " + authorizedLine(ca.PublicKey())
	cases := []struct {
		name  string
		lines []string
		key   ssh.PublicKey
		want  string // "" for accepted, "unknown" for a host trust on first use may take
	}{
		{"signed by the trusted CA", []string{caLine}, valid(ca, "10.1.2.3"), ""},
		{"no principals: any host", []string{caLine}, valid(ca), ""},
		{"another host's certificate", []string{caLine}, valid(ca, "10.1.2.4"), `principal "10.1.2.3" not in the set`},
		{"CA for other hosts only", []string{"@cert-authority 10.9.* " + authorizedLine(ca.PublicKey())}, valid(ca, "10.1.2.3"), "unknown"},
		{"expired", []string{caLine}, certify(t, ca, hostKey, ssh.HostCert, nil, now.Add(-2*time.Hour), now.Add(-time.Hour)), "has expired (valid from " + now.Add(-2*time.Hour).UTC().Format(time.RFC3339)},
		{"not yet valid", []string{caLine}, certify(t, ca, hostKey, ssh.HostCert, nil, now.Add(time.Hour), now.Add(2*time.Hour)), "is not yet valid"},
		{"user certificate", []string{caLine}, certify(t, ca, hostKey, ssh.UserCert, nil, now.Add(-time.Hour), now.Add(time.Hour)), "is a user certificate"},
		{"key revoked", []string{caLine, "@revoked * " + authorizedLine(hostKey)}, valid(ca), "its key is listed @revoked at"},
		{"CA revoked", []string{caLine, "@revoked * " + authorizedLine(ca.PublicKey())}, valid(ca), "the CA that signed it is listed @revoked"},
		{"signed by another CA", []string{caLine}, valid(otherCA), "which " + "KH" + " does not trust for it"},
		// As OpenSSH: a certificate of an unknown CA is checked as its key.
		{"another CA, key on file", []string{caLine, "10.1.2.3 " + authorizedLine(hostKey)}, valid(otherCA), ""},
		{"no lines at all", []string{"# empty"}, valid(otherCA), "unknown"},
		{"plain key where only a CA is trusted", []string{caLine}, hostKey, "is a plain ssh-ed25519 key, not a certificate"},
		{"plain key on file beside the CA", []string{caLine, "10.1.2.3 " + authorizedLine(hostKey)}, hostKey, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			known := knownHostsFile(t, c.lines...)
			h, err := newHostKeys(known)
			if err != nil {
				t.Fatal(err)
			}
			err = h.check(addr, &net.TCPAddr{}, c.key)
			want := strings.ReplaceAll(c.want, "KH", known)
			switch {
			case want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case want == "unknown" && !unknownHost(err):
				t.Fatalf("got %v, want an unknown host", err)
			case want != "" && want != "unknown" && (err == nil || !strings.Contains(h.explain(addr, err).Error(), want)):
				t.Fatalf("got %v, want %q", err, want)
			}
		})
	}
}

// TestHostKeyAlgorithmsForCA: a host a CA is trusted for is asked for a
// certificate first; one without a CA line never is.
func TestHostKeyAlgorithmsForCA(t *testing.T) {
	ca, hostKey := newSigner(t), newSigner(t).PublicKey()
	known := knownHostsFile(t,
		"@cert-authority 10.1.* "+authorizedLine(ca.PublicKey()),
		"10.1.0.2 "+authorizedLine(hostKey),
		"10.2.0.1 "+authorizedLine(hostKey))
	h, err := newHostKeys(known)
	if err != nil {
		t.Fatal(err)
	}
	isCert := func(a string) bool { return slices.Contains(certHostAlgos, a) }
	for _, c := range []struct {
		addr       string
		certsFirst bool
		plain      []string
	}{
		{"10.1.0.1:22", true, plainHostAlgos},               // CA only: any plain key, to refuse it clearly
		{"10.1.0.2:22", true, []string{ssh.KeyAlgoED25519}}, // CA and a key
		{"10.2.0.1:22", false, []string{ssh.KeyAlgoED25519}},
	} {
		_, algos, err := h.callback(c.addr)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for n < len(algos) && isCert(algos[n]) {
			n++
		}
		if c.certsFirst && !slices.Equal(algos[:n], certHostAlgos) || !c.certsFirst && n != 0 {
			t.Errorf("%s: algorithms %v", c.addr, algos)
		}
		if !slices.Equal(algos[n:], c.plain) {
			t.Errorf("%s: plain algorithms %v, want %v", c.addr, algos[n:], c.plain)
		}
	}
	if !slices.Contains(certHostAlgos, ssh.CertAlgoED25519v01) || slices.Contains(plainHostAlgos, ssh.CertAlgoED25519v01) {
		t.Fatalf("cert algorithms %v, plain %v", certHostAlgos, plainHostAlgos)
	}
}

// TestTrustOnFirstUseOfCertificate: an unknown host serving a certificate
// is trusted by its plain key, the one known_hosts can hold.
func TestTrustOnFirstUseOfCertificate(t *testing.T) {
	known := knownHostsFile(t, "# no hosts yet")
	h, err := newHostKeys(known)
	if err != nil {
		t.Fatal(err)
	}
	hostKey := newSigner(t).PublicKey()
	now := time.Now()
	cert := certify(t, newSigner(t), hostKey, ssh.HostCert, nil, now.Add(-time.Hour), now.Add(time.Hour))
	const addr = "10.1.2.3:22"
	if err := h.check(addr, &net.TCPAddr{}, cert); !unknownHost(err) {
		t.Fatalf("unknown host with a certificate: %v", err)
	}
	if err := h.trust(addr, &net.TCPAddr{}, cert); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, known); !strings.Contains(got, "10.1.2.3 "+authorizedLine(hostKey)) || strings.Contains(got, "cert") {
		t.Fatalf("known_hosts after trusting a certificate:\n%s", got)
	}
	fresh, err := newHostKeys(known)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []ssh.PublicKey{hostKey, cert} {
		if err := fresh.check(addr, &net.TCPAddr{}, k); err != nil {
			t.Errorf("%s after trust: %v", k.Type(), err)
		}
	}
}

func TestCheckValidity(t *testing.T) {
	from := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	to := from.Add(time.Hour)
	c := &ssh.Certificate{ValidAfter: uint64(from.Unix()), ValidBefore: uint64(to.Unix())}
	for _, tc := range []struct {
		now  time.Time
		want string
	}{
		{from.Add(-time.Second), "is not yet valid (valid from 2030-01-02T03:04:05Z to 2030-01-02T04:04:05Z; now 2030-01-02T03:04:04Z)"},
		{from, ""},
		{to.Add(-time.Second), ""},
		{to, "has expired (valid from 2030-01-02T03:04:05Z to 2030-01-02T04:04:05Z; now 2030-01-02T04:04:05Z)"},
	} {
		err := checkValidity(c, tc.now)
		if got := errString(err); got != tc.want {
			t.Errorf("at %s: %q, want %q", tc.now, got, tc.want)
		}
	}
	forever := &ssh.Certificate{ValidAfter: 0, ValidBefore: ssh.CertTimeInfinity}
	if err := checkValidity(forever, to); err != nil {
		t.Errorf("always:forever: %v", err)
	}
	forever.ValidAfter = uint64(to.Unix())
	if got := errString(checkValidity(forever, from)); !strings.Contains(got, "to forever;") {
		t.Errorf("window without an end: %q", got)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestUserCertFiles: which certificate a login presents, and the refusals
// that name what is wrong with it before any connection is made.
func TestUserCertFiles(t *testing.T) {
	key := writeKey(t)
	signer := parseKeyFile(t, key)
	ca := newSigner(t)
	now := time.Now()
	write := func(path string, c ssh.PublicKey) string {
		if err := os.WriteFile(path, ssh.MarshalAuthorizedKey(c), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	e := endpoint{Addr: "10.1.2.3:22", User: "root", IdentityFile: key}
	if c, err := certSigner(e, signer, nil); c != nil || err != nil {
		t.Fatalf("no certificate beside the key: %v %v", c, err)
	}
	valid := certify(t, ca, signer.PublicKey(), ssh.UserCert, []string{"root"}, now.Add(-time.Minute), now.Add(time.Hour))
	write(key+"-cert.pub", valid)
	c, err := certSigner(e, signer, nil)
	if err != nil || c == nil || !keysEqual(c.PublicKey(), valid) {
		t.Fatalf("certificate beside the key: %v", err)
	}

	other := filepath.Join(t.TempDir(), "elsewhere.pub")
	for _, tc := range []struct {
		name string
		cert ssh.PublicKey
		want string
	}{
		{"expired", certify(t, ca, signer.PublicKey(), ssh.UserCert, nil, now.Add(-2*time.Hour), now.Add(-time.Hour)),
			`certificate "test-cert" (serial 7) in ` + other + " for root@10.1.2.3:22 has expired (valid from"},
		{"not yet valid", certify(t, ca, signer.PublicKey(), ssh.UserCert, nil, now.Add(time.Hour), now.Add(2*time.Hour)), "is not yet valid"},
		{"another key", certify(t, ca, newSigner(t).PublicKey(), ssh.UserCert, nil, now.Add(-time.Hour), now.Add(time.Hour)), "not the key in identity file " + key},
		{"host certificate", certify(t, ca, signer.PublicKey(), ssh.HostCert, nil, now.Add(-time.Hour), now.Add(time.Hour)), "holds a host certificate"},
		{"plain key", signer.PublicKey(), "holds a plain ssh-ed25519 key, not a certificate"},
	} {
		e := e
		e.CertificateFile = write(other, tc.cert)
		if _, err := certSigner(e, signer, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	e.CertificateFile = filepath.Join(t.TempDir(), "missing-cert.pub")
	if _, err := certSigner(e, signer, nil); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), e.CertificateFile) {
		t.Errorf("missing certificate_file: %v", err)
	}

	// With no identity file, the certified key is looked for in the agent.
	e = endpoint{Addr: "10.1.2.3:22", User: "root", CertificateFile: key + "-cert.pub"}
	agentKeys := func(keys ...ssh.Signer) func() ([]ssh.Signer, error) {
		return func() ([]ssh.Signer, error) { return keys, nil }
	}
	if c, err := certSigner(e, nil, agentKeys(newSigner(t), signer)); err != nil || !keysEqual(c.PublicKey(), valid) {
		t.Fatalf("certificate of an agent key: %v", err)
	}
	if _, err := certSigner(e, nil, agentKeys(newSigner(t))); err == nil || !strings.Contains(err.Error(), "neither an identity file nor in ssh-agent") {
		t.Fatalf("certificate of a key nowhere: %v", err)
	}
}

func parseKeyFile(t *testing.T, path string) ssh.Signer {
	t.Helper()
	pem, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
