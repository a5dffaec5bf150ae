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
	loads int // times the file was parsed
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
// those of its known keys. Without that, the server may pick a key type
// that is not in known_hosts and look like a changed key.
func (h *hostKeys) callback(addr string) (ssh.HostKeyCallback, []string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.loadLocked(); err != nil {
		return nil, nil, err
	}
	var algos []string
	var ke *knownhosts.KeyError
	if err := h.checkLocked(addr, &net.TCPAddr{}, h.probe); errors.As(err, &ke) {
		seen := map[string]bool{}
		for _, k := range ke.Want {
			for _, a := range algorithmsFor(k.Key.Type()) {
				if !seen[a] {
					seen[a] = true
					algos = append(algos, a)
				}
			}
		}
	}
	return h.check, algos, nil
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
	err := h.parsed(hostname, remote, key)
	if !unknownHost(err) {
		return err
	}
	known, ok := h.added[knownhosts.Normalize(hostname)]
	switch {
	case !ok:
		return err
	case bytes.Equal(known.Key.Marshal(), key.Marshal()):
		return nil
	}
	return &knownhosts.KeyError{Want: []knownhosts.KnownKey{known}}
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
	h.lines = bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		h.lines++
	}
	h.loads++
	return nil
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
	switch {
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return fmt.Errorf("host key unknown: %s not in %s: %w", addr, path, err)
	case errors.As(err, &ke):
		return fmt.Errorf("host key changed for %s (%s has %s): possible MITM, refusing to connect: %w", addr, path, ke.Want[0].String(), err)
	case errors.As(err, &revoked):
		return fmt.Errorf("host key of %s is revoked in %s: %w", addr, revoked.Revoked.Filename, err)
	}
	return fmt.Errorf("host key of %s refused: %w", addr, err)
}
