package transport

import (
	"fmt"

	"golang.org/x/crypto/ssh/knownhosts"
)

// UseKnownHosts points host key checks at path from the next dial on, for
// an inventory reloaded with a new known_hosts, and makes the next dial
// read the file again even when it looks unchanged (a SIGHUP). A file that
// does not parse is refused, and the one in use stays.
func (s *SSH) UseKnownHosts(path string) error {
	if path == "" {
		return fmt.Errorf("known_hosts: required")
	}
	if _, err := knownhosts.New(path); err != nil {
		return fmt.Errorf("known_hosts: %w", err)
	}
	h := s.keys
	h.mu.Lock()
	defer h.mu.Unlock()
	h.path, h.parsed = path, nil
	return nil
}

// file is the known_hosts file in use.
func (h *hostKeys) file() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.path
}
