package psenc

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestEncodeMatchesPowerShell(t *testing.T) {
	// The documented example of powershell.exe -EncodedCommand:
	// [Convert]::ToBase64String([Text.Encoding]::Unicode.GetBytes('dir "c:\program files" '))
	if got, want := Encode(`dir "c:\program files" `), "ZABpAHIAIAAiAGMAOgBcAHAAcgBvAGcAcgBhAG0AIABmAGkAbABlAHMAIgAgAA=="; got != want {
		t.Fatalf("Encode = %s, want %s", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, s := range []string{"", "Get-Process", "'it''s' \"q\" `t $x", "C:\\Program Files\\ä\\😀.ps1", "line1\r\nline2"} {
		enc := Encode(s)
		got, err := Decode(enc)
		if err != nil || got != s {
			t.Fatalf("round trip of %q: %q, %v", s, got, err)
		}
		if raw, _ := base64.StdEncoding.DecodeString(enc); len(raw)%2 != 0 {
			t.Fatalf("%q: UTF-16LE must be an even number of bytes", s)
		}
	}
	if _, err := Decode("QQ=="); err == nil {
		t.Fatal("an odd byte count must be refused")
	}
}

func TestCompressedExpands(t *testing.T) {
	script := "#drover:probe\n$p = ConvertFrom-Json '{\"a\":\"it''s\"}'\n" + strings.Repeat("Get-Process -Id $id\n", 200)
	c := Compressed(script)
	if len(c) > len(script)/3 || !strings.HasPrefix(c, "iex ") {
		t.Fatalf("compressed to %d of %d characters", len(c), len(script))
	}
	got, err := Expand(c)
	if err != nil || got != script {
		t.Fatalf("expand: %v", err)
	}
	if got, err := Expand(script); err != nil || got != script {
		t.Fatal("a plain script expands to itself")
	}
}
