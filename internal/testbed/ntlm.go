package testbed

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strings"
	"time"
	"unicode/utf16"

	"golang.org/x/crypto/md4" //lint:ignore SA1019 NTLM is defined over MD4
)

// NTLM (MS-NLMP) as a WinRM host speaks it inside HTTP Negotiate: a
// negotiate message gets a challenge, and the authenticate message's
// NTLMv2 proof must match the host's password. Only what a client needs
// to prove it authenticates is checked: no signing, no sealing, no MIC.

// ntlmTarget is the domain the double's challenge names.
const ntlmTarget = "DROVER-DOUBLE"

// ntlmFlags: unicode, request target, NTLM, extended session security,
// target info; never LM_KEY or KEY_EXCH, which NTLMv2-only clients refuse.
const ntlmFlags = 0x00000001 | 0x00000004 | 0x00000200 | 0x00080000 | 0x00800000

func utf16le(s string) []byte {
	u := utf16.Encode([]rune(s))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return b
}

func fromUTF16le(b []byte) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}

// putField writes an NTLM (length, max length, offset) field.
func putField(b []byte, n, off int) {
	binary.LittleEndian.PutUint16(b, uint16(n))
	binary.LittleEndian.PutUint16(b[2:], uint16(n))
	binary.LittleEndian.PutUint32(b[4:], uint32(off))
}

// field reads one, or nil when it points outside msg.
func field(msg []byte, at int) []byte {
	if len(msg) < at+8 {
		return nil
	}
	n := int(binary.LittleEndian.Uint16(msg[at:]))
	off := int(binary.LittleEndian.Uint32(msg[at+4:]))
	if off < 0 || off+n > len(msg) {
		return nil
	}
	return msg[off : off+n]
}

// challengeMessage is the CHALLENGE_MESSAGE for server challenge ch.
func challengeMessage(ch [8]byte) []byte {
	name := utf16le(ntlmTarget)
	var info []byte
	for _, id := range []uint16{2, 1} { // MsvAvNbDomainName, MsvAvNbComputerName
		info = binary.LittleEndian.AppendUint16(info, id)
		info = binary.LittleEndian.AppendUint16(info, uint16(len(name)))
		info = append(info, name...)
	}
	info = append(info, 0, 0, 0, 0) // MsvAvEOL
	const fixed = 48
	b := make([]byte, fixed)
	copy(b, "NTLMSSP\x00")
	binary.LittleEndian.PutUint32(b[8:], 2)
	putField(b[12:], len(name), fixed)
	binary.LittleEndian.PutUint32(b[20:], ntlmFlags)
	copy(b[24:32], ch[:])
	putField(b[40:], len(info), fixed+len(name))
	return append(append(b, name...), info...)
}

func hmacMD5(key []byte, data ...[]byte) []byte {
	m := hmac.New(md5.New, key)
	for _, d := range data {
		m.Write(d)
	}
	return m.Sum(nil)
}

// ntlmAuth answers one step of an NTLM handshake. It reports whether the
// request is authenticated; when not, it has written the response.
func (h *WinHost) ntlmAuth(w http.ResponseWriter, scheme, data string) bool {
	msg, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(msg) < 12 || !bytes.Equal(msg[:8], []byte("NTLMSSP\x00")) {
		h.refuse(w, true)
		return false
	}
	switch binary.LittleEndian.Uint32(msg[8:]) {
	case 1: // NEGOTIATE: answer with a fresh challenge
		var ch [8]byte
		_, _ = rand.Read(ch[:])
		h.mu.Lock()
		now := time.Now()
		for c, at := range h.challenges {
			if now.Sub(at) > time.Minute {
				delete(h.challenges, c)
			}
		}
		h.challenges[ch] = now
		h.mu.Unlock()
		w.Header().Set("WWW-Authenticate", scheme+" "+base64.StdEncoding.EncodeToString(challengeMessage(ch)))
		w.WriteHeader(http.StatusUnauthorized)
		return false
	case 3: // AUTHENTICATE: check the NTLMv2 proof against an open challenge
		nt, domain, user := field(msg, 20), field(msg, 28), field(msg, 36)
		if len(nt) > 16 && strings.EqualFold(fromUTF16le(user), h.User) {
			hash := md4.New()
			hash.Write(utf16le(h.Password))
			ntowf := hmacMD5(hash.Sum(nil), utf16le(strings.ToUpper(fromUTF16le(user))+fromUTF16le(domain)))
			h.mu.Lock()
			for ch := range h.challenges {
				if hmac.Equal(hmacMD5(ntowf, ch[:], nt[16:]), nt[:16]) {
					delete(h.challenges, ch)
					h.stats.NTLMLogons++
					h.mu.Unlock()
					return true
				}
			}
			h.mu.Unlock()
		}
	}
	h.refuse(w, true)
	return false
}
