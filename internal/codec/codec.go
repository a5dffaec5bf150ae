// Package codec encrypts Temporal payloads with AES-256-GCM, so workflow
// inputs, results, memos and failure messages are stored encrypted in the
// server's history. Workflow ids, types and search attributes stay in the
// clear: the server indexes them.
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Metadata of an encrypted payload. The original payload, metadata
// included, is the plaintext, so not even its encoding is visible.
const (
	Encoding      = "binary/encrypted"
	metaEncoding  = "encoding"
	metaKeyID     = "encryption-key-id"
	keyBytes      = 32 // AES-256
	keyIDHexChars = 16
)

// Key is one AES-256 key with the id stored beside each payload it
// encrypted, so a payload always finds its key after a rotation.
type Key struct {
	ID   string
	aead cipher.AEAD
}

// ParseKey reads a key written as base64 or hex text of 32 random bytes,
// for example the output of `openssl rand -base64 32`.
func ParseKey(text string) (Key, error) {
	s := strings.TrimSpace(text)
	var raw []byte
	if b, err := hex.DecodeString(s); err == nil && len(b) == keyBytes {
		raw = b
	} else if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == keyBytes {
		raw = b
	} else {
		// Never echo the text: it may be a key with a typo.
		return Key{}, fmt.Errorf("not a key: want %d random bytes as base64 (openssl rand -base64 32) or hex", keyBytes)
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return Key{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return Key{}, err
	}
	// The id is a hash of the key under a fixed label: it tells keys apart
	// and reveals nothing of a 256-bit random key.
	sum := sha256.Sum256(append([]byte("drover payload key id\x00"), raw...))
	return Key{ID: hex.EncodeToString(sum[:])[:keyIDHexChars], aead: aead}, nil
}

// Source names where a key is: a file, or an environment variable. The key
// itself is never a config value.
type Source struct {
	File string
	Env  string
}

// Load reads the key from its source; field names the setting in errors.
func (s Source) Load(field string) (Key, error) {
	var text string
	switch {
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return Key{}, fmt.Errorf("%s: %w", field, err)
		}
		text = string(b)
	case s.Env != "":
		v, ok := os.LookupEnv(s.Env)
		if !ok || v == "" {
			return Key{}, fmt.Errorf("%s: environment variable %s is not set", field, s.Env)
		}
		text = v
	default:
		return Key{}, fmt.Errorf("%s: no key file or environment variable", field)
	}
	k, err := ParseKey(text)
	if err != nil {
		return Key{}, fmt.Errorf("%s: %w", field, err)
	}
	return k, nil
}

// Codec is a converter.PayloadCodec: it encrypts with the current key and
// decrypts with any key it holds. Payloads that are not encrypted pass
// through Decode unchanged, so histories from before the codec was turned
// on still read.
type Codec struct {
	current Key
	byID    map[string]Key
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New builds a codec encrypting with current and also decrypting with old
// (keys rotated out whose histories are still kept).
func New(current Key, old ...Key) *Codec {
	c := &Codec{current: current, byID: map[string]Key{current.ID: current}}
	for _, k := range old {
		c.byID[k.ID] = k
	}
	return c
}

// KeyID is the current key's id.
func (c *Codec) KeyID() string { return c.current.ID }

// Encode encrypts each payload whole.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		nonce := make([]byte, c.current.aead.NonceSize(), c.current.aead.NonceSize()+len(plain)+c.current.aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{metaEncoding: []byte(Encoding), metaKeyID: []byte(c.current.ID)},
			// The key id is authenticated too: a payload cannot be
			// relabelled to another key.
			Data: c.current.aead.Seal(nonce, nonce, plain, []byte(c.current.ID)),
		}
	}
	return out, nil
}

// ErrUnknownKey means a payload was encrypted with a key this codec lacks.
var ErrUnknownKey = errors.New("payload encrypted with a key not configured here")

// Decode decrypts encrypted payloads and leaves the others as they are.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[metaEncoding]) != Encoding {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[metaKeyID])
		k, ok := c.byID[id]
		if !ok {
			return nil, fmt.Errorf("%w (key id %q)", ErrUnknownKey, id)
		}
		ns := k.aead.NonceSize()
		if len(p.Data) < ns {
			return nil, errors.New("encrypted payload too short")
		}
		plain, err := k.aead.Open(nil, p.Data[:ns], p.Data[ns:], []byte(id))
		if err != nil {
			return nil, fmt.Errorf("decrypt payload (key id %q): %w", id, err)
		}
		var orig commonpb.Payload
		if err := proto.Unmarshal(plain, &orig); err != nil {
			return nil, fmt.Errorf("decrypted payload: %w", err)
		}
		out[i] = &orig
	}
	return out, nil
}
