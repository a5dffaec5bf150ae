package transport

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// hostKeys is the known_hosts file, re-read when it changes so hosts can
// be added without a restart. Keys trusted on first use are appended to
// the file and kept in memory beside it rather than making the next dial
// parse the whole file again: a first contact with a fleet of n hosts
// would otherwise parse it n times, under the lock every dial takes.
type hostKeys struct {
	path  string
	probe ssh.PublicKey // matches nothing; asking with it lists a host's known keys

	mu      sync.Mutex
	parsed  ssh.HostKeyCallback // the file as last parsed; nil to parse again
	modTime time.Time           // the file's state as parsed, plus our appends
	size    int64
	lines   int // lines in the file, so an appended key's line is known
	// added are the keys appended since the file was last parsed, by
	// normalized address.
	added map[string]knownhosts.KnownKey
	// caLines are the line numbers of the file's @cert-authority lines and
	// revoked its @revoked keys, by key: knownhosts keeps both to itself,
	// but a refused certificate is explained with them.
	caLines map[int]bool
	revoked map[string]knownhosts.KnownKey
	loads   int // times the file was parsed
}

func newHostKeys(path string) (*hostKeys, error) {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	probe, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	h := &hostKeys{path: path, probe: probe}
	if _, _, err := h.callback("probe:22"); err != nil {
		return nil, err
	}
	return h, nil
}

// callback returns the checker and the host key algorithms to offer addr:
// those of its known keys, after every certificate algorithm when a CA is
// trusted for it. Without that, the server may pick a key type that is not
// in known_hosts and look like a changed key, or show its plain key where
// only its certificate would be trusted.
func (h *hostKeys) callback(addr string) (ssh.HostKeyCallback, []string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.loadLocked(); err != nil {
		return nil, nil, err
	}
	cas, keys := h.knownLocked(addr)
	var algos []string
	if len(cas) > 0 {
		algos = append(algos, certHostAlgos...)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		for _, a := range algorithmsFor(k.Key.Type()) {
			if !seen[a] {
				seen[a] = true
				algos = append(algos, a)
			}
		}
	}
	if len(cas) > 0 && len(keys) == 0 {
		// A host with no certificate then shows its plain key and is
		// refused for that, not for want of a common algorithm.
		algos = append(algos, plainHostAlgos...)
	}
	return h.check, algos, nil
}

// knownLocked lists what the file trusts for addr: the CA keys of its
// matching @cert-authority lines, and its host keys, trusted on first use
// included.
func (h *hostKeys) knownLocked(addr string) (cas, keys []knownhosts.KnownKey) {
	var ke *knownhosts.KeyError
	if errors.As(h.parsed(addr, &net.TCPAddr{}, h.probe), &ke) {
		cas, keys = h.splitLocked(ke.Want)
	}
	if k, ok := h.added[knownhosts.Normalize(addr)]; ok {
		keys = append(keys, k)
	}
	return cas, keys
}

// splitLocked separates CA lines from host key lines: knownhosts lists
// both as keys wanted for a host.
func (h *hostKeys) splitLocked(want []knownhosts.KnownKey) (cas, keys []knownhosts.KnownKey) {
	for _, k := range want {
		if h.caLines[k.Line] {
			cas = append(cas, k)
		} else {
			keys = append(keys, k)
		}
	}
	return cas, keys
}

// check verifies a host's key against the file and the keys trusted since
// it was parsed.
func (h *hostKeys) check(hostname string, remote net.Addr, key ssh.PublicKey) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.parsed == nil { // dropped by a trust that saw another writer
		if err := h.loadLocked(); err != nil {
			return err
		}
	}
	return h.checkLocked(hostname, remote, key)
}

// checkLocked is check with h.mu held and the file loaded.
func (h *hostKeys) checkLocked(hostname string, remote net.Addr, key ssh.PublicKey) error {
	if cert, ok := key.(*ssh.Certificate); ok {
		return h.checkCertLocked(hostname, remote, cert)
	}
	err := h.parsed(hostname, remote, key)
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) {
		return err
	}
	cas, keys := h.splitLocked(ke.Want)
	if len(keys) == 0 {
		if known, ok := h.added[knownhosts.Normalize(hostname)]; ok {
			if bytes.Equal(known.Key.Marshal(), key.Marshal()) {
				return nil
			}
			keys = append(keys, known)
		}
	}
	switch {
	case len(keys) > 0:
		return &knownhosts.KeyError{Want: keys}
	case len(cas) > 0:
		// Not unknown either: trust on first use never overrides a CA.
		return refusal("host key of %s is a plain %s key, not a certificate: %s trusts only certificates signed by the CA on line %d for it",
			hostname, key.Type(), h.path, cas[0].Line)
	}
	return err
}

// checkCertLocked checks a host certificate as OpenSSH does: not revoked,
// signed by a CA that an @cert-authority line trusts for the host, valid
// now, naming the host. One from a CA not trusted for the host is checked
// as its plain key.
func (h *hostKeys) checkCertLocked(hostname string, remote net.Addr, cert *ssh.Certificate) error {
	name := certName(cert)
	if cert.CertType != ssh.HostCert {
		return refusal("host key of %s is a user certificate %s, not a host certificate", hostname, name)
	}
	for _, k := range []struct {
		what string
		key  ssh.PublicKey
	}{{"its key", cert.Key}, {"the CA that signed it", cert.SignatureKey}} {
		if r, ok := h.revoked[string(plainKey(k.key).Marshal())]; ok {
			return refusal("host certificate %s of %s is revoked: %s is listed @revoked at %s:%d", name, hostname, k.what, r.Filename, r.Line)
		}
	}
	cas, _ := h.knownLocked(hostname)
	var ca *knownhosts.KnownKey
	for i := range cas {
		if bytes.Equal(cas[i].Key.Marshal(), cert.SignatureKey.Marshal()) {
			ca = &cas[i]
			break
		}
	}
	if ca == nil {
		err := h.checkLocked(hostname, remote, cert.Key)
		if err == nil || len(cas) == 0 {
			return err
		}
		return refusal("host certificate %s of %s is signed by CA %s, which %s does not trust for it (line %d names CA %s)",
			name, hostname, ssh.FingerprintSHA256(cert.SignatureKey), h.path, cas[0].Line, ssh.FingerprintSHA256(cas[0].Key))
	}
	if err := checkValidity(cert, time.Now()); err != nil {
		return refusal("host certificate %s of %s %v", name, hostname, err)
	}
	host, _, err := net.SplitHostPort(hostname)
	if err != nil {
		return err
	}
	// Principals, critical options and the CA's signature.
	if err := new(ssh.CertChecker).CheckCert(host, cert); err != nil {
		return refusal("host certificate %s of %s (CA at %s:%d): %v", name, hostname, ca.Filename, ca.Line, err)
	}
	return nil
}

// hostKeyRefusal is a refusal whose message already says what an operator
// needs to know.
type hostKeyRefusal struct{ msg string }

func (r *hostKeyRefusal) Error() string { return r.msg }

func refusal(format string, args ...any) error {
	return &hostKeyRefusal{msg: fmt.Sprintf(format, args...)}
}

// loadLocked (re)parses the file when it changed; h.mu is held.
func (h *hostKeys) loadLocked() error {
	fi, err := os.Stat(h.path)
	if err != nil {
		return fmt.Errorf("known_hosts: %w", err)
	}
	if h.parsed != nil && fi.ModTime().Equal(h.modTime) && fi.Size() == h.size {
		return nil
	}
	// Stat before reading: a change made meanwhile shows on the next use.
	parsed, err := knownhosts.New(h.path)
	if err != nil {
		return fmt.Errorf("known_hosts: %w", err)
	}
	data, err := os.ReadFile(h.path)
	if err != nil {
		return fmt.Errorf("known_hosts: %w", err)
	}
	h.parsed, h.modTime, h.size, h.added = parsed, fi.ModTime(), fi.Size(), nil
	h.caLines, h.revoked = markerLines(h.path, data)
	h.lines = bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		h.lines++
	}
	h.loads++
	return nil
}

// markerLines finds the file's @cert-authority and @revoked lines, numbered
// as knownhosts numbers them.
func markerLines(path string, data []byte) (map[int]bool, map[string]knownhosts.KnownKey) {
	cas, revoked := map[int]bool{}, map[string]knownhosts.KnownKey{}
	for i, line := range bytes.Split(data, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("@")) {
			continue
		}
		marker, _, key, _, _, err := ssh.ParseKnownHosts(line)
		switch {
		case err != nil:
			// knownhosts parsed the file; one changed since is read again.
		case marker == "cert-authority":
			cas[i+1] = true
		case marker == "revoked":
			revoked[string(plainKey(key).Marshal())] = knownhosts.KnownKey{Key: key, Filename: path, Line: i + 1}
		}
	}
	return cas, revoked
}

// unknownHost reports a refusal because the host has no key on file at
// all, the only case trust on first use may accept.
func unknownHost(err error) bool {
	var ke *knownhosts.KeyError
	return errors.As(err, &ke) && len(ke.Want) == 0
}

// trust appends key for addr to known_hosts, unless the host got a key on
// file meanwhile (another connection trusted it first): then that key
// decides.
func (h *hostKeys) trust(addr string, remote net.Addr, key ssh.PublicKey) error {
	key = plainKey(key) // a certificate's CA is not trusted: its key is
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.loadLocked(); err != nil {
		return err
	}
	if err := h.checkLocked(addr, remote, key); err == nil || !unknownHost(err) {
		return err
	}
	f, err := os.OpenFile(h.path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("known_hosts: trust on first use: %w", err)
	}
	host := knownhosts.Normalize(addr)
	line := knownhosts.Line([]string{host}, key) + "\n"
	last := make([]byte, 1)
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		// A file not ending in a newline would glue the line to its last.
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			line = "\n" + line
		}
	}
	_, err = f.WriteString(line)
	fi, serr := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		h.parsed = nil // parse again on next use, whatever was written
		return fmt.Errorf("known_hosts: trust on first use: %w", err)
	}
	if serr != nil || fi.Size() != h.size+int64(len(line)) {
		// Someone else wrote to the file too: parse it again.
		h.parsed = nil
		return nil
	}
	// Only our line changed the file: the parsed view plus the key is it.
	h.modTime, h.size = fi.ModTime(), fi.Size()
	// A last line without a newline was counted already; the newline
	// written before the key ends it.
	h.lines++
	if h.added == nil {
		h.added = map[string]knownhosts.KnownKey{}
	}
	h.added[host] = knownhosts.KnownKey{Key: key, Filename: h.path, Line: h.lines}
	return nil
}

func algorithmsFor(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}

// explain turns a host key refusal into the message an operator needs.
func (h *hostKeys) explain(addr string, err error) error {
	path := h.file()
	var ke *knownhosts.KeyError
	var revoked *knownhosts.RevokedError
	var r *hostKeyRefusal
	switch {
	case errors.As(err, &r):
		return r
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return fmt.Errorf("host key unknown: %s not in %s: %w", addr, path, err)
	case errors.As(err, &ke):
		return fmt.Errorf("host key changed for %s (%s has %s): possible MITM, refusing to connect: %w", addr, path, ke.Want[0].String(), err)
	case errors.As(err, &revoked):
		return fmt.Errorf("host key of %s is revoked in %s: %w", addr, revoked.Revoked.Filename, err)
	}
	return fmt.Errorf("host key of %s refused: %w", addr, err)
}
