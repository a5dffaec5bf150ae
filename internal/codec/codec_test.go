package codec

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

func newKey(t *testing.T, fill byte) Key {
	t.Helper()
	k, err := ParseKey(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{fill}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestRoundTripThroughDataConverter(t *testing.T) {
	c := New(newKey(t, 1))
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
	type input struct {
		StartCmd string
		Hosts    []string
	}
	in := input{StartCmd: "echo plaintext-marker", Hosts: []string{"10.0.0.1"}}
	p, err := dc.ToPayload(in)
	if err != nil {
		t.Fatal(err)
	}
	wire, _ := proto.Marshal(p)
	if bytes.Contains(wire, []byte("plaintext-marker")) || bytes.Contains(wire, []byte("json/plain")) {
		t.Fatalf("encoded payload shows its plaintext or encoding: %q", wire)
	}
	if got := string(p.Metadata["encoding"]); got != Encoding {
		t.Fatalf("encoding %q", got)
	}
	var out input
	if err := dc.FromPayload(p, &out); err != nil {
		t.Fatal(err)
	}
	if out.StartCmd != in.StartCmd || len(out.Hosts) != 1 || out.Hosts[0] != "10.0.0.1" {
		t.Fatalf("round trip: %+v", out)
	}
	// Two encryptions of one value differ: fresh nonces.
	p2, _ := dc.ToPayload(in)
	if bytes.Equal(p.Data, p2.Data) {
		t.Fatal("same ciphertext twice")
	}
}

func TestDecodeRefusesTamperingAndUnknownKeys(t *testing.T) {
	k1, k2 := newKey(t, 1), newKey(t, 2)
	plain := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"x"`)}
	enc, err := New(k1).Encode([]*commonpb.Payload{plain})
	if err != nil {
		t.Fatal(err)
	}
	flipped := proto.Clone(enc[0]).(*commonpb.Payload)
	flipped.Data[len(flipped.Data)-1] ^= 1
	if _, err := New(k1).Decode([]*commonpb.Payload{flipped}); err == nil {
		t.Error("a tampered payload decoded")
	}
	relabelled := proto.Clone(enc[0]).(*commonpb.Payload)
	relabelled.Metadata["encryption-key-id"] = []byte(k2.ID)
	if _, err := New(k1, k2).Decode([]*commonpb.Payload{relabelled}); err == nil {
		t.Error("a payload relabelled to another key decoded")
	}
	if _, err := New(k2).Decode(enc); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("without its key: %v", err)
	}
	// Rotation: the new current key still reads what the old one wrote.
	got, err := New(k2, k1).Decode(enc)
	if err != nil || !proto.Equal(got[0], plain) {
		t.Fatalf("after rotation: %v %v", got, err)
	}
	// Unencrypted payloads (written before encryption was on) pass through.
	got, err = New(k1).Decode([]*commonpb.Payload{plain})
	if err != nil || !proto.Equal(got[0], plain) {
		t.Fatalf("passthrough: %v %v", got, err)
	}
}

func TestParseKey(t *testing.T) {
	raw := bytes.Repeat([]byte{7}, 32)
	b64, err := ParseKey(base64.StdEncoding.EncodeToString(raw) + "\n")
	if err != nil {
		t.Fatal(err)
	}
	hx, err := ParseKey(strings.Repeat("07", 32))
	if err != nil {
		t.Fatal(err)
	}
	if b64.ID != hx.ID || len(b64.ID) != keyIDHexChars {
		t.Fatalf("ids %q %q", b64.ID, hx.ID)
	}
	for _, bad := range []string{"", "short", base64.StdEncoding.EncodeToString(raw[:16]), "zz" + strings.Repeat("07", 31)} {
		_, err := ParseKey(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if bad != "" && strings.Contains(err.Error(), bad) {
			t.Errorf("error echoes the key text: %v", err)
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte(base64.StdEncoding.EncodeToString(raw)), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := (Source{File: file}).Load("codec_key_file"); err != nil || k.ID != b64.ID {
		t.Fatalf("from file: %v", err)
	}
	t.Setenv("DROVER_TEST_CODEC_KEY", strings.Repeat("07", 32))
	if k, err := (Source{Env: "DROVER_TEST_CODEC_KEY"}).Load("codec_key_env"); err != nil || k.ID != b64.ID {
		t.Fatalf("from env: %v", err)
	}
	if _, err := (Source{Env: "DROVER_TEST_CODEC_UNSET"}).Load("codec_key_env"); err == nil || !strings.Contains(err.Error(), "codec_key_env") {
		t.Fatalf("unset env: %v", err)
	}
}

func TestHandler(t *testing.T) {
	c := New(newKey(t, 3))
	enc, err := c.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"hello"`)}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	srv := httptest.NewServer(Handler(c, ServerOptions{Origins: []string{"http://127.0.0.1:8233"}, Token: "tok"}))
	defer srv.Close()
	post := func(path, origin, auth string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", "default")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp, b.String()
	}
	resp, out := post("/decode", "http://127.0.0.1:8233", "Bearer tok")
	if resp.StatusCode != http.StatusOK || !strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(`"hello"`))) {
		t.Fatalf("decode: %d %s", resp.StatusCode, out)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "http://127.0.0.1:8233" {
		t.Errorf("CORS origin %q", got)
	}
	if resp, _ := post("/decode", "http://evil.example", "Bearer tok"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Error("CORS granted to an origin not configured")
	}
	for _, auth := range []string{"", "Bearer nope"} {
		if resp, out := post("/decode", "", auth); resp.StatusCode != http.StatusUnauthorized || strings.Contains(out, "aGVsbG8") {
			t.Errorf("auth %q: %d %s", auth, resp.StatusCode, out)
		}
	}
	// The browser's preflight carries no token and must pass.
	req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
	req.Header.Set("Origin", "http://127.0.0.1:8233")
	req.Header.Set("Access-Control-Request-Method", "POST")
	pre, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pre.Body.Close()
	if pre.StatusCode != http.StatusOK || !strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "X-Namespace") {
		t.Fatalf("preflight: %d %v", pre.StatusCode, pre.Header)
	}
}
