// Package psenc is PowerShell's -EncodedCommand form: base64 of the
// script's UTF-16LE code units. It stands alone so that the WinRM test
// double decodes commands with the very code that encodes them.
package psenc

import (
	"encoding/base64"
	"errors"
	"unicode/utf16"
)

// Encode is script as -EncodedCommand takes it.
func Encode(script string) string {
	u := utf16.Encode([]rune(script))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		b[2*i], b[2*i+1] = byte(c), byte(c>>8)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// Decode reverses Encode.
func Decode(encoded string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return "", err
	}
	if len(b)%2 != 0 {
		return "", errors.New("encoded command: odd number of bytes for UTF-16LE")
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return string(utf16.Decode(u)), nil
}
