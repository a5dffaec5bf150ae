package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestCertificates runs ops on hosts trusted only through the host CA in
// known_hosts and logged in to only with user certificates, each signed by
// ssh-keygen -s and checked by sshd (HostCertificate, TrustedUserCAKeys,
// RevokedKeys): valid ones work, an expired or revoked one gets its own
// code and says why, and a renewal on disk heals the next op with no
// restart.
func TestCertificates(t *testing.T) {
	e := newEnvWith(t, testbed.Options{Hosts: 5, Certificates: true}, server.Address)
	h := e.bed.Hosts
	good, hostExpired, hostRevoked, userExpired, userRevoked := h[0], h[1], h[2], h[3], h[4]

	// The host CA is the only trust, bar one revoked host key.
	known := "@cert-authority * " + string(ssh.MarshalAuthorizedKey(e.bed.HostCA())) +
		"@revoked * " + string(ssh.MarshalAuthorizedKey(hostRevoked.PublicKey()))
	if err := os.WriteFile(e.bed.KnownHostsPath, []byte(known), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := hostExpired.SignHostKey("-2h:-1h", ""); err != nil {
		t.Fatal(err)
	}

	// Keys no host authorizes: only their certificates let them in.
	dir := t.TempDir()
	newKey := func(name string) (string, ssh.PublicKey) {
		path := filepath.Join(dir, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v %s", err, out)
		}
		data, err := os.ReadFile(path + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey(data)
		if err != nil {
			t.Fatal(err)
		}
		return path, pub
	}
	sign := func(pub ssh.PublicKey, certPath, validity string) *ssh.Certificate {
		if err := e.bed.SignUserKey(pub, certPath, "root", validity); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(certPath)
		if err != nil {
			t.Fatal(err)
		}
		c, _, _, _, err := ssh.ParseAuthorizedKey(data)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*ssh.Certificate)
	}
	goodKey, goodPub := newKey("id_good")
	sign(goodPub, goodKey+"-cert.pub", "-5m:+1h") // beside the key
	expiredKey, expiredPub := newKey("id_expired")
	issued := filepath.Join(dir, "issued", "expired-cert.pub")
	if err := os.MkdirAll(filepath.Dir(issued), 0o755); err != nil {
		t.Fatal(err)
	}
	expired := sign(expiredPub, issued, "-2h:-1h")
	revokedKey, revokedPub := newKey("id_revoked")
	sign(revokedPub, revokedKey+"-cert.pub", "-5m:+1h")
	if err := e.bed.RevokeKey(revokedPub); err != nil {
		t.Fatal(err)
	}

	entry := func(host *testbed.Host, fields ...string) map[string]any {
		m := map[string]any{"ip": host.IP, "bk_cloud_id": 0, "bk_supplier_id": 0, "identity_file": goodKey}
		for i := 0; i < len(fields); i += 2 {
			m[fields[i]] = fields[i+1]
		}
		return m
	}
	e.writeInventory([]map[string]any{
		entry(good), entry(hostExpired), entry(hostRevoked),
		entry(userExpired, "identity_file", expiredKey, "certificate_file", issued),
		entry(userRevoked, "identity_file", revokedKey),
	}, nil)
	e.startWorker()

	spec := sampleSpec("gse", "svc")
	status := func() map[string]proc.HostResult {
		var items []proc.Item
		for _, host := range h {
			items = append(items, proc.Item{Target: proc.Target{IP: host.IP}, Process: proc.ProcessID{Namespace: "gse", Name: "svc"}, Spec: &spec})
		}
		res := e.runOperate(workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: proc.OpStatus, Items: items})
		out := map[string]proc.HostResult{}
		for _, r := range res.Results {
			out[r.Key] = r.HostResult
		}
		return out
	}
	// Reached and logged in, the op answers for the process: not running.
	const reached = proc.CodeNotRunning
	stamp := func(t uint64) string { return time.Unix(int64(t), 0).UTC().Format(time.RFC3339) }
	window := "has expired (valid from " + stamp(expired.ValidAfter) + " to " + stamp(expired.ValidBefore)
	want := []struct {
		host *testbed.Host
		code proc.Code
		says []string
	}{
		{good, reached, nil},
		{hostExpired, proc.CodeHostKey, []string{"host certificate", hostExpired.Addr(), "has expired (valid from"}},
		{hostRevoked, proc.CodeHostKey, []string{"is revoked: its key is listed @revoked"}},
		{userExpired, proc.CodeAuthFailed, []string{"certificate", issued, "root@" + userExpired.Addr(), window}},
		{userRevoked, proc.CodeAuthFailed, []string{"unable to authenticate"}},
	}
	got := status()
	for _, w := range want {
		r := got[key(w.host.IP, "gse", "svc")]
		if r.Code != w.code {
			t.Errorf("%s: %d %q, want %d", w.host.IP, r.Code, r.Message, w.code)
		}
		for _, s := range w.says {
			if !strings.Contains(r.Message, s) {
				t.Errorf("%s: message %q lacks %q", w.host.IP, r.Message, s)
			}
		}
	}
	if log, _ := os.ReadFile(userRevoked.LogPath()); !strings.Contains(string(log), "revoked") {
		t.Errorf("sshd did not refuse the revoked key itself:\n%s", log)
	}

	// Renewed certificates, host and user, are used by the next op.
	if err := hostExpired.SignHostKey("-5m:+1h", ""); err != nil {
		t.Fatal(err)
	}
	sign(expiredPub, issued, "-5m:+1h")
	got = status()
	for _, host := range []*testbed.Host{good, hostExpired, userExpired} {
		if r := got[key(host.IP, "gse", "svc")]; r.Code != reached {
			t.Errorf("%s after renewal: %d %q", host.IP, r.Code, r.Message)
		}
	}
}
