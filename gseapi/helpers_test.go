package gseapi

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// seedDir holds, verbatim, the request examples of the API documents the
// project re-implements, as the repository keeps them for its end-to-end
// tests: one copy, so the two suites cannot drift apart.
const seedDir = "../internal/e2e/testdata/seeds"

// seedFiles maps each seed example to the APIs whose request it documents.
var seedFiles = []struct {
	file string
	apis []string
}{
	{"operate_process.json", []string{APIOperateProcess}},
	{"operate_proc.json", []string{APIOperateProc, APIOperateProcV2}},
	{"operate_proc_v2.json", []string{APIOperateProcV2, APIOperateProc}},
	{"manage_proc.json", []string{APIManageProc}},
	{"register_proc_info.json", []string{APIRegisterProcInfo, APIUpdateProcInfo, APIUnregisterProcInfo}},
}

// exampleOf reads a seed document's request example. A missing fixture
// fails the test: a skip would let the seed tests pass having checked
// nothing.
func exampleOf(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(seedDir, file))
	if err != nil {
		t.Fatalf("seed example: %v", err)
	}
	return b
}

// absent, as a value for edit, deletes the field.
type absent struct{}

// edit returns base with the value at a dotted path (numeric parts index
// arrays) replaced by v, or deleted when v is absent{}. json.RawMessage
// values are inserted as written.
func edit(t testing.TB, base, path string, v any) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(base))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		t.Fatalf("edit: base: %v", err)
	}
	parts := strings.Split(path, ".")
	cur := root
	for i, p := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				if _, del := v.(absent); del {
					delete(c, p)
				} else {
					c[p] = v
				}
				break
			}
			cur = c[p]
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil || n >= len(c) {
				t.Fatalf("edit: %s: bad index %q", path, p)
			}
			if last {
				c[n] = v
				break
			}
			cur = c[n]
		default:
			t.Fatalf("edit: %s: %q is not inside an object or array", path, p)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(root); err != nil {
		t.Fatalf("edit: %v", err)
	}
	return buf.String()
}

// raw parses a JSON fragment for use as an edit value.
func raw(s string) json.RawMessage { return json.RawMessage(s) }
