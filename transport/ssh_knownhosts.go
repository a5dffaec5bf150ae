package transport

import (
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
// be added without a restart.
type hostKeys struct {
	path  string
	probe ssh.PublicKey // matches nothing; asking with it lists a host's known keys

	mu      sync.Mutex
	check   ssh.HostKeyCallback
	modTime time.Time
	size    int64
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

// callback returns the current checker and the host key algorithms to
// offer addr: those of its known keys. Without that, the server may pick a
// key type that is not in known_hosts and look like a changed key.
func (h *hostKeys) callback(addr string) (ssh.HostKeyCallback, []string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.loadLocked(); err != nil {
		return nil, nil, err
	}
	var algos []string
	var ke *knownhosts.KeyError
	if err := h.check(addr, &net.TCPAddr{}, h.probe); errors.As(err, &ke) {
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

// loadLocked (re)reads the file when it changed; h.mu is held.
func (h *hostKeys) loadLocked() error {
	fi, err := os.Stat(h.path)
	if err != nil {
		return fmt.Errorf("known_hosts: %w", err)
	}
	if h.check == nil || !fi.ModTime().Equal(h.modTime) || fi.Size() != h.size {
		check, err := knownhosts.New(h.path)
		if err != nil {
			return fmt.Errorf("known_hosts: %w", err)
		}
		h.check, h.modTime, h.size = check, fi.ModTime(), fi.Size()
	}
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
	if err := h.check(addr, remote, key); err == nil || !unknownHost(err) {
		return err
	}
	f, err := os.OpenFile(h.path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("known_hosts: trust on first use: %w", err)
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(addr)}, key) + "\n"
	last := make([]byte, 1)
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		// A file not ending in a newline would glue the line to its last.
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			line = "\n" + line
		}
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("known_hosts: trust on first use: %w", err)
	}
	h.check = nil // re-read on next use
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
	var ke *knownhosts.KeyError
	var revoked *knownhosts.RevokedError
	switch {
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return fmt.Errorf("host key unknown: %s not in %s: %w", addr, h.path, err)
	case errors.As(err, &ke):
		return fmt.Errorf("host key changed for %s (%s has %s): possible MITM, refusing to connect: %w", addr, h.path, ke.Want[0].String(), err)
	case errors.As(err, &revoked):
		return fmt.Errorf("host key of %s is revoked in %s: %w", addr, revoked.Revoked.Filename, err)
	}
	return fmt.Errorf("host key of %s refused: %w", addr, err)
}
