package transport

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// writeEncryptedKey writes a passphrase-protected key and returns its path
// and public key.
func writeEncryptedKey(t *testing.T, passphrase string) (string, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(passphrase))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "id_encrypted")
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return path, sshPub
}

func emptyKnownHosts(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestIdentityFileParsedOnce dials, as far as building the credentials,
// many times with the same identity files: each is read and decrypted once
// until it changes, and never against another passphrase.
func TestIdentityFileParsedOnce(t *testing.T) {
	s := newSSH(t, emptyKnownHosts(t))
	plain := writeKey(t)
	const pass = "pass-phrase-never-shown"
	encrypted, encryptedPub := writeEncryptedKey(t, pass)
	t.Setenv("DROVER_TEST_PASSPHRASE", pass)
	t.Setenv("DROVER_TEST_WRONG_PASSPHRASE", "wrong-phrase")

	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		for _, e := range []endpoint{{User: "root", IdentityFile: plain}, {User: "root", IdentityFile: encrypted, PassphraseEnv: "DROVER_TEST_PASSPHRASE"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, closeAgent, err := s.authMethods(e)
				if err != nil {
					t.Error(err)
					return
				}
				closeAgent()
			}()
		}
	}
	wg.Wait()
	if st := s.Stats(); st.KeyLoads != 2 {
		t.Fatalf("32 dials over two key files: %+v, want each file read once", st)
	}

	// The decrypted key is not handed out against a wrong passphrase.
	_, _, err := s.authMethods(endpoint{User: "root", IdentityFile: encrypted, PassphraseEnv: "DROVER_TEST_WRONG_PASSPHRASE"})
	if err == nil || !strings.Contains(err.Error(), "DROVER_TEST_WRONG_PASSPHRASE") || strings.Contains(err.Error(), "wrong-phrase") {
		t.Fatalf("wrong passphrase: %v", err)
	}
	signer, err := s.ids.signer(encrypted, "DROVER_TEST_PASSPHRASE")
	if err != nil || !keysEqual(signer.PublicKey(), encryptedPub) {
		t.Fatalf("encrypted key after a wrong passphrase: %v", err)
	}

	// A changed file is read again.
	replacement, err := os.ReadFile(writeKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, replacement, 0o600); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(plain, future, future); err != nil { // the rewrite may keep the size and mtime
		t.Fatal(err)
	}
	signer, err = s.ids.signer(plain, "")
	if err != nil {
		t.Fatal(err)
	}
	want, err := ssh.ParsePrivateKey(replacement)
	if err != nil {
		t.Fatal(err)
	}
	if !keysEqual(signer.PublicKey(), want.PublicKey()) {
		t.Fatal("the rewritten key file still gave the old key")
	}
	if st := s.Stats(); st.KeyLoads != 4 {
		t.Fatalf("after a wrong passphrase and a rewrite: %+v, want 4 reads", st)
	}
}

func keysEqual(a, b ssh.PublicKey) bool {
	return string(a.Marshal()) == string(b.Marshal())
}
