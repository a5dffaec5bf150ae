package testbed

import (
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/crypto/ssh"
)

// AuthorizeKey lets pub log in to every host of the bed, as root and as
// AppUser, next to the bed's own client key.
func (b *Bed) AuthorizeKey(pub ssh.PublicKey) error {
	f, err := os.OpenFile(b.authorizedKeys, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(ssh.MarshalAuthorizedKey(pub))
	return err
}

// SetAppPassword gives AppUser a password, for beds started with
// PasswordAuth; the returned func locks password logins again (the
// account keeps working with keys). The account is machine-wide, so the
// change is made under the same lock that creates it.
func SetAppPassword(password string) (restore func() error, err error) {
	if strings.ContainsAny(password, ":\n") {
		return nil, fmt.Errorf("password must not contain ':' or a newline")
	}
	if err := checkPrereqs(); err != nil {
		return nil, err
	}
	chpasswd, err := findTool("chpasswd", "passwd")
	if err != nil {
		return nil, err
	}
	locked := func(fn func() error) error {
		f, err := os.OpenFile(filepath.Join(lockDir, "accounts.lock"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			return fmt.Errorf("lock accounts: %w", err)
		}
		return fn()
	}
	err = locked(func() error {
		cmd := exec.Command(chpasswd)
		cmd.Stdin = strings.NewReader(AppUser + ":" + password + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("chpasswd %s: %v: %s", AppUser, err, strings.TrimSpace(string(out)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return func() error {
		return locked(func() error {
			// "*", as ensureAppUser sets it: no password, keys still accepted.
			if out, err := exec.Command(tools.usermod, "-p", "*", AppUser).CombinedOutput(); err != nil {
				return fmt.Errorf("usermod %s: %v: %s", AppUser, err, strings.TrimSpace(string(out)))
			}
			return nil
		})
	}, nil
}

// AddEncryptedKey writes a new ed25519 private key to path, encrypted with
// passphrase, and lets it log in to the bed's hosts.
func (b *Bed) AddEncryptedKey(path, passphrase string) error {
	priv, pub, _, err := newKey()
	if err != nil {
		return err
	}
	blk, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(passphrase))
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		return err
	}
	return b.AuthorizeKey(pub)
}
