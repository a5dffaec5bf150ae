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

func TestQuoteDoublesEveryKindOfSingleQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":                    "''",
		"it's":                "'it''s'",
		"a\u2019b":            "'a\u2019\u2019b'",
		"\u2018x\u201a\u201b": "'\u2018\u2018x\u201a\u201a\u201b\u201b'",
		"$x `n \"":            "'$x `n \"'",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestInvocationRoundTrip(t *testing.T) {
	script := "param([string]$A, [string]$B)\nif ($A) { \"$A\" }\n} 'not' 'args'\n\"$B\"\nexit 0\n"
	for _, args := range [][]string{
		nil,
		{"", "x"},
		{"it's", "a\u2019b", "\n} 'x' 'y'", "-Force", "$(whoami)", "' ; Remove-Item C:\\ ; '"},
	} {
		inv := Invocation("control", script, args)
		if !strings.HasPrefix(inv, "#drover:control\n& {\nparam(") {
			t.Fatalf("invocation %q", inv)
		}
		name, got, gotArgs, ok := ParseInvocation(inv)
		if !ok || name != "control" || got != script || len(gotArgs) != len(args) {
			t.Fatalf("parse of %q: %q %q %q %v", inv, name, got, gotArgs, ok)
		}
		for i := range args {
			if gotArgs[i] != args[i] {
				t.Fatalf("arg %d: %q, want %q", i, gotArgs[i], args[i])
			}
		}
	}
	if _, _, _, ok := ParseInvocation("Get-Process"); ok {
		t.Fatal("a plain script is no invocation")
	}
}
