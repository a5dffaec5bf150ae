package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
)

// hostCertValidity is what a host certificate gets unless a test asks for
// another window: valid now, with room for clock skew.
const hostCertValidity = "-5m:+1d"

// certAuthorities are a bed's two CAs (Options.Certificates), keys made in
// Go like the hosts' and used by ssh-keygen -s as an operator's would be.
type certAuthorities struct {
	hostCA, userCA string // private key paths
	hostCAPub      ssh.PublicKey
	userCAPub      string // path of the public key, for TrustedUserCAKeys
	revoked        string // RevokedKeys file: public keys, one a line
}

// makeCertAuthorities writes the CA keys and an empty revocation list.
func (b *Bed) makeCertAuthorities() error {
	dir := filepath.Join(b.Dir, "ca")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ca := &certAuthorities{
		hostCA:    filepath.Join(dir, "host_ca"),
		userCA:    filepath.Join(dir, "user_ca"),
		userCAPub: filepath.Join(dir, "user_ca.pub"),
		revoked:   filepath.Join(dir, "revoked_keys"),
	}
	for _, k := range []struct {
		path string
		pub  *ssh.PublicKey
	}{{ca.hostCA, &ca.hostCAPub}, {ca.userCA, nil}} {
		_, pub, pemBytes, err := newKey()
		if err != nil {
			return err
		}
		if err := writeFileAtomic(k.path, pemBytes, 0o600); err != nil {
			return err
		}
		if err := writeFileAtomic(k.path+".pub", ssh.MarshalAuthorizedKey(pub), 0o644); err != nil {
			return err
		}
		if k.pub != nil {
			*k.pub = pub
		}
	}
	// sshd refuses every key when RevokedKeys names a file it cannot read.
	if err := writeFileAtomic(ca.revoked, nil, 0o644); err != nil {
		return err
	}
	b.ca = ca
	return nil
}

// HostCA is the public key of the CA that signs the hosts' keys, for
// @cert-authority lines; nil unless the bed was started with Certificates.
func (b *Bed) HostCA() ssh.PublicKey {
	if b.ca == nil {
		return nil
	}
	return b.ca.hostCAPub
}

// SignUserKey writes to certPath a user certificate for pub, signed by the
// bed's user CA with ssh-keygen -s: valid for principals (comma-separated
// login names, as -n takes them) over validity (as -V takes it: "-5m:+1h",
// "-2h:-1h"). The file is replaced in one step, as a renewal would.
func (b *Bed) SignUserKey(pub ssh.PublicKey, certPath, principals, validity string) error {
	if b.ca == nil {
		return fmt.Errorf("testbed: SignUserKey needs a bed started with Certificates")
	}
	return sign(b.ca.userCA, pub, certPath, "user-"+principals, principals, validity, false)
}

// RevokeKey lists pub in the hosts' RevokedKeys: sshd refuses it, and any
// certificate of it, from the next login on (it reads the file at each).
func (b *Bed) RevokeKey(pub ssh.PublicKey) error {
	if b.ca == nil {
		return fmt.Errorf("testbed: RevokeKey needs a bed started with Certificates")
	}
	old, err := os.ReadFile(b.ca.revoked)
	if err != nil {
		return err
	}
	return writeFileAtomic(b.ca.revoked, append(old, ssh.MarshalAuthorizedKey(pub)...), 0o644)
}

func (h *Host) certPath() string { return h.keyPath() + "-cert.pub" }

// HostCertificate is the certificate sshd serves, nil on a bed without
// Certificates.
func (h *Host) HostCertificate() (*ssh.Certificate, error) {
	if h.bed.ca == nil {
		return nil, nil
	}
	return readCertificate(h.certPath())
}

// SignHostKey signs the host's current key again with the host CA, for
// validity (ssh-keygen -V syntax) and principals (comma-separated; the
// host's IP when empty), and restarts sshd to serve the new certificate.
func (h *Host) SignHostKey(validity, principals string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bed.ca == nil {
		return fmt.Errorf("host %s: SignHostKey needs a bed started with Certificates", h.IP)
	}
	if err := h.reloadableLocked(); err != nil {
		return err
	}
	if principals == "" {
		principals = h.IP
	}
	if err := sign(h.bed.ca.hostCA, h.pub, h.certPath(), "host-"+h.IP, principals, validity, true); err != nil {
		return err
	}
	return h.reloadLocked()
}

// signHostKeyLocked gives a freshly written host key its certificate.
func (h *Host) signHostKeyLocked() error {
	if h.bed.ca == nil {
		return nil
	}
	return sign(h.bed.ca.hostCA, h.pub, h.certPath(), "host-"+h.IP, h.IP, hostCertValidity, true)
}

// certConfig is the sshd_config lines of a bed with Certificates.
func (h *Host) certConfig(w func(string, ...any)) {
	if h.bed.ca == nil {
		return
	}
	w("HostCertificate", h.certPath())
	w("TrustedUserCAKeys", h.bed.ca.userCAPub)
	w("RevokedKeys", h.bed.ca.revoked)
}

// sign runs ssh-keygen -s on a copy of pub in a directory of its own, then
// moves the certificate to certPath.
func sign(caPath string, pub ssh.PublicKey, certPath, identity, principals, validity string, host bool) error {
	dir, err := os.MkdirTemp(filepath.Dir(certPath), ".sign")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pubPath := filepath.Join(dir, "key.pub")
	if err := os.WriteFile(pubPath, ssh.MarshalAuthorizedKey(pub), 0o644); err != nil {
		return err
	}
	args := []string{"-q", "-s", caPath, "-I", identity, "-n", principals, "-V", validity}
	if host {
		args = append(args, "-h")
	}
	out, err := exec.Command(tools.keygen, append(args, pubPath)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ssh-keygen -s %s: %v: %s", filepath.Base(caPath), err, strings.TrimSpace(string(out)))
	}
	if err := os.Chmod(filepath.Join(dir, "key-cert.pub"), 0o644); err != nil {
		return err
	}
	return os.Rename(filepath.Join(dir, "key-cert.pub"), certPath)
}

func readCertificate(path string) (*ssh.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cert, ok := pub.(*ssh.Certificate)
	if !ok {
		return nil, fmt.Errorf("%s: not a certificate", path)
	}
	return cert, nil
}
