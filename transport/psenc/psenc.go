// Package psenc is PowerShell's -EncodedCommand form: base64 of the
// script's UTF-16LE code units. It stands alone so that the WinRM test
// double decodes commands with the very code that encodes them.
package psenc

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"io"
	"strings"
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

// Compressed is a PowerShell script that runs script from a gzip payload:
// about a third of the length for drover's scripts, for a script whose
// -EncodedCommand form would not fit a command line.
func Compressed(script string) string {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = zw.Write([]byte(script))
	_ = zw.Close()
	return compressedPrefix + base64.StdEncoding.EncodeToString(b.Bytes()) + compressedSuffix
}

const (
	compressedPrefix = "iex (New-Object IO.StreamReader((New-Object IO.Compression.GZipStream([IO.MemoryStream][Convert]::FromBase64String('"
	compressedSuffix = "'), [IO.Compression.CompressionMode]::Decompress)), [Text.Encoding]::UTF8)).ReadToEnd()"
)

// Expand returns the script a Compressed one runs, or script itself when it
// is not one.
func Expand(script string) (string, error) {
	i := strings.Index(script, compressedPrefix)
	if i < 0 || !strings.HasSuffix(script, compressedSuffix) {
		return script, nil
	}
	raw, err := base64.StdEncoding.DecodeString(script[i+len(compressedPrefix) : len(script)-len(compressedSuffix)])
	if err != nil {
		return "", err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return "", err
	}
	out, err := io.ReadAll(zr)
	return string(out), err
}
