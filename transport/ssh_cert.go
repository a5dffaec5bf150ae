package transport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// certHostAlgos and plainHostAlgos split the host key algorithms x/crypto
// supports: a host is asked for a certificate only when known_hosts has a
// CA for it.
var certHostAlgos, plainHostAlgos = splitHostKeyAlgorithms()

func splitHostKeyAlgorithms() (certs, plain []string) {
	for _, a := range ssh.SupportedAlgorithms().HostKeys {
		if strings.Contains(a, "-cert-v01@") {
			certs = append(certs, a)
		} else {
			plain = append(plain, a)
		}
	}
	return certs, plain
}

// plainKey is the key a certificate certifies, or k itself.
func plainKey(k ssh.PublicKey) ssh.PublicKey {
	if c, ok := k.(*ssh.Certificate); ok {
		return c.Key
	}
	return k
}

// checkValidity is nil when cert is valid at now, else an error saying
// which way it is not, with its window: "has expired (valid from ... to
// ...; now ...)". The bounds are x/crypto's own (CertChecker.CheckCert).
func checkValidity(cert *ssh.Certificate, now time.Time) error {
	window := fmt.Sprintf("valid from %s to %s; now %s", certTime(cert.ValidAfter, "always"),
		certTime(cert.ValidBefore, "forever"), now.UTC().Format(time.RFC3339))
	unix := now.Unix()
	if after := int64(cert.ValidAfter); after < 0 || unix < after {
		return fmt.Errorf("is not yet valid (%s)", window)
	}
	if before := int64(cert.ValidBefore); cert.ValidBefore != ssh.CertTimeInfinity && (before < 0 || unix >= before) {
		return fmt.Errorf("has expired (%s)", window)
	}
	return nil
}

func certTime(t uint64, unbounded string) string {
	if t == 0 || t == ssh.CertTimeInfinity {
		return unbounded
	}
	if t > 1<<62 { // beyond what time.Unix formats sensibly
		return fmt.Sprintf("%d (unix)", t)
	}
	return time.Unix(int64(t), 0).UTC().Format(time.RFC3339)
}

// certName names a certificate in messages: its key id and serial, as
// ssh-keygen -L shows them.
func certName(c *ssh.Certificate) string {
	return fmt.Sprintf("%q (serial %d)", c.KeyId, c.Serial)
}

// userCert reads the certificate e presents: certificate_file, else the
// identity file's KEY-cert.pub beside it when there is one; nil when
// neither. It is read at every dial, so a certificate renewed on disk is
// used from the next one.
func userCert(e endpoint) (*ssh.Certificate, string, error) {
	path, named := e.CertificateFile, true
	if path == "" {
		if e.IdentityFile == "" {
			return nil, "", nil
		}
		path, named = e.IdentityFile+"-cert.pub", false
	}
	data, err := os.ReadFile(path)
	if !named && errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, path, fmt.Errorf("certificate file %s: %w", path, err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(data)
	if err != nil {
		return nil, path, fmt.Errorf("certificate file %s: %w", path, err)
	}
	cert, ok := pub.(*ssh.Certificate)
	if !ok {
		return nil, path, fmt.Errorf("certificate file %s holds a plain %s key, not a certificate", path, pub.Type())
	}
	if cert.CertType != ssh.UserCert {
		return nil, path, fmt.Errorf("certificate file %s holds a host certificate, not a user certificate", path)
	}
	return cert, path, nil
}

// certSigner pairs the certificate e presents, if any, with its key: the
// identity file's, else one of the agent's. A certificate that is not
// valid now fails the dial before any connection is made, naming the
// login and the certificate's window.
func certSigner(e endpoint, identity ssh.Signer, agentSigners func() ([]ssh.Signer, error)) (ssh.Signer, error) {
	cert, path, err := userCert(e)
	if err != nil || cert == nil {
		return nil, err
	}
	if err := checkValidity(cert, time.Now()); err != nil {
		return nil, fmt.Errorf("certificate %s in %s for %s %w", certName(cert), path, e, err)
	}
	certified := string(cert.Key.Marshal())
	if identity != nil {
		if string(identity.PublicKey().Marshal()) != certified {
			return nil, fmt.Errorf("certificate %s certifies key %s, not the key in identity file %s (%s)",
				path, ssh.FingerprintSHA256(cert.Key), e.IdentityFile, ssh.FingerprintSHA256(identity.PublicKey()))
		}
		return ssh.NewCertSigner(cert, identity)
	}
	if agentSigners != nil {
		if keys, err := agentSigners(); err == nil {
			for _, k := range keys {
				if string(k.PublicKey().Marshal()) == certified {
					return ssh.NewCertSigner(cert, k)
				}
			}
		}
	}
	return nil, fmt.Errorf("certificate %s certifies key %s, which is neither an identity file nor in ssh-agent", path, ssh.FingerprintSHA256(cert.Key))
}
