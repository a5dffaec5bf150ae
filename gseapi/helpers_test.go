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

// seedDir holds the API documents the project re-implements.
const seedDir = "../../shared/seeds"

// seedFiles maps each seed document to the APIs whose request it documents.
var seedFiles = []struct {
	file string
	apis []string
}{
	{"000_519dbf3e639a57c7.txt", []string{APIOperateProcess}},
	{"001_c173949ae98e3f0d.txt", []string{APIOperateProc, APIOperateProcV2}},
	{"002_233a44dd528cd82f.txt", []string{APIOperateProcV2, APIOperateProc}},
	{"003_879e1882ae780e1b.txt", []string{APIManageProc}},
	{"004_97590a93539ef556.txt", []string{APIRegisterProcInfo, APIUpdateProcInfo, APIUnregisterProcInfo}},
}

// exampleOf extracts, verbatim, the request example of a seed document:
// the first fenced block after the request-example heading.
func exampleOf(t testing.TB, file string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(seedDir, file))
	if err != nil {
		t.Skipf("seed documents not beside the repository: %v", err)
	}
	doc := string(raw)
	h := -1
	for _, heading := range []string{"请求参数示例", "Request Parameters Example"} {
		if i := strings.Index(doc, heading); i >= 0 {
			h = i
			break
		}
	}
	if h < 0 {
		t.Fatalf("%s: no request example heading", file)
	}
	open := strings.Index(doc[h:], "```")
	if open < 0 {
		t.Fatalf("%s: no fenced example", file)
	}
	body := doc[h+open+3:]
	body = body[strings.IndexByte(body, '\n')+1:] // the fence's language tag
	end := strings.Index(body, "```")
	if end < 0 {
		t.Fatalf("%s: unterminated example", file)
	}
	return []byte(body[:end])
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
