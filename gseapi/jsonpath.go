package gseapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// pathAtOffset names, with array indexes, the JSON value of body that ends at
// off (for a scalar) or whose opening bracket ends at off (for an object or
// array). encoding/json reports type errors by a dotted path without indexes
// ("hosts.bk_cloud_id") and by that offset; the index is what tells a caller
// which of a thousand hosts is wrong. It returns "" when no value matches.
func pathAtOffset(body []byte, off int64) string {
	type frame struct {
		array   bool
		idx     int
		key     string
		wantKey bool
	}
	var stack []frame
	render := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.array {
				b.WriteString("[" + strconv.Itoa(f.idx) + "]")
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
		return b.String()
	}
	valueDone := func() {
		if n := len(stack); n > 0 && !stack[n-1].array {
			stack[n-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		end := dec.InputOffset()
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			if len(stack) == 0 {
				return ""
			}
			stack = stack[:len(stack)-1]
			valueDone()
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			key, _ := tok.(string)
			stack[n-1].key, stack[n-1].wantKey = key, false
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].array {
			stack[n-1].idx++
		}
		if end == off {
			p := render()
			if p == "" {
				return "(body)"
			}
			return p
		}
		if end > off {
			return ""
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, frame{array: d == '[', idx: -1, wantKey: d == '{'})
			continue
		}
		valueDone()
	}
}

// prefixPath joins a parent path and a child path as field names are
// written in errors: "a" + "b" is "a.b", "a" + "[0].b" is "a[0].b".
func prefixPath(parent, child string) string {
	switch {
	case parent == "":
		return child
	case child == "" || child == "(body)":
		return parent
	case child[0] == '[':
		return parent + child
	}
	return parent + "." + child
}

// decodeAt decodes a value held back as raw JSON, naming type errors by
// their full path under field.
func decodeAt(field string, raw json.RawMessage, v any) error {
	err := json.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	fe, ok := decodeError(raw, err).(*FieldError)
	if !ok {
		return err
	}
	fe.Field = prefixPath(field, fe.Field)
	return fe
}
