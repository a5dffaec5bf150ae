package transport

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/drover-sh/drover/inventory"
)

// identities holds identity files parsed, and decrypted, once: a cold
// operation over thousands of hosts sharing one key would otherwise read
// and parse it, and run the passphrase's key derivation, once per dial.
type identities struct {
	mu    sync.Mutex
	files map[string]*identity // by path
	loads atomic.Int64         // files read and parsed
}

// identity is one file's key, valid while the file keeps the size and
// modification time it had when read.
type identity struct {
	// mu is held while the file is read, so concurrent dials with a cold
	// cache parse it once.
	mu      sync.Mutex
	signer  ssh.Signer
	modTime time.Time
	size    int64
	// passSum is the SHA-256 of the passphrase that decrypted the key, nil
	// for a key stored in the clear. The decrypted key is handed out only
	// against the same passphrase, so an entry naming an unset or wrong
	// one fails as it would on a first read. It never leaves memory.
	passSum []byte
}

// signer returns the key in path, read again only when the file changed.
// Failures are not kept: the next dial reads the file again.
func (ids *identities) signer(path, passphraseEnv string) (ssh.Signer, error) {
	ids.mu.Lock()
	if ids.files == nil {
		ids.files = map[string]*identity{}
	}
	id := ids.files[path]
	if id == nil {
		id = &identity{}
		ids.files[path] = id
	}
	ids.mu.Unlock()

	id.mu.Lock()
	defer id.mu.Unlock()
	if id.signer != nil && id.passMatches(passphraseEnv) {
		if fi, err := os.Stat(path); err == nil && fi.ModTime().Equal(id.modTime) && fi.Size() == id.size {
			return id.signer, nil
		}
	}
	ids.loads.Add(1)
	signer, sum, fi, err := readIdentity(path, passphraseEnv)
	if err != nil {
		return nil, err
	}
	id.signer, id.passSum, id.modTime, id.size = signer, sum, fi.ModTime(), fi.Size()
	return signer, nil
}

func (id *identity) passMatches(passphraseEnv string) bool {
	if id.passSum == nil {
		return true
	}
	pass, ok := inventory.PasswordFrom(passphraseEnv)
	sum := sha256.Sum256([]byte(pass))
	return ok && subtle.ConstantTimeCompare(sum[:], id.passSum) == 1
}

// readIdentity parses path, decrypting it with the passphrase in
// passphraseEnv when it is protected. It returns the passphrase's digest
// (nil when none was needed) and the file's state as read. Errors name the
// file and the variable, never the passphrase.
func readIdentity(path, passphraseEnv string) (ssh.Signer, []byte, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("identity file %s: %w", path, err)
	}
	defer f.Close()
	// The state of the file opened, so a change made while it is read is
	// seen as one on the next dial.
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("identity file %s: %w", path, err)
	}
	pem, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("identity file %s: %w", path, err)
	}
	var sum []byte
	signer, err := ssh.ParsePrivateKey(pem)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		pass, ok := inventory.PasswordFrom(passphraseEnv)
		if !ok {
			return nil, nil, nil, fmt.Errorf("identity file %s is passphrase-protected; set passphrase_env or load it into ssh-agent", path)
		}
		signer, err = ssh.ParsePrivateKeyWithPassphrase(pem, []byte(pass))
		if errors.Is(err, x509.IncorrectPasswordError) {
			return nil, nil, nil, fmt.Errorf("identity file %s: the passphrase in %s is wrong", path, passphraseEnv)
		}
		s := sha256.Sum256([]byte(pass))
		sum = s[:]
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("identity file %s: %w", path, err)
	}
	return signer, sum, fi, nil
}
