// Package jsonshape compares JSON answers by shape: which fields they carry
// and with which JSON types, whatever their values. The tests that hold
// drover's answers to the documented ones use it.
package jsonshape

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
)

// resultKey matches a per-host result key in any of its documented forms
// (cloud:supplier:ip:namespace:name, cloud:ip:namespace:name).
var resultKey = regexp.MustCompile(`^\d+:(\d+:)?[^:]+:.*:.*$`)

// Of maps each field path of a JSON value to its JSON type. Array elements
// share the path `[]` and per-host result keys the path `<key>`, so two
// answers about different hosts or tasks have one shape.
func Of(v any) map[string]string {
	out := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			out[path] = "object"
			for k, child := range x {
				if k == "<key>" || resultKey.MatchString(k) {
					k = "<key>"
				}
				walk(path+"."+k, child)
			}
		case []any:
			out[path] = "array"
			for _, child := range x {
				walk(path+"[]", child)
			}
		case string:
			out[path] = "string"
		case float64:
			out[path] = "number"
		case bool:
			out[path] = "bool"
		case nil:
			out[path] = "null"
		}
	}
	walk("", v)
	return out
}

// OfJSON is the shape of a JSON text.
func OfJSON(b []byte) (map[string]string, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return Of(v), nil
}

// File is the shape of the JSON document in file, a documented example.
func File(file string) (map[string]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	s, err := OfJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

// Missing lists the documented paths that got lacks or types otherwise.
func Missing(documented, got map[string]string) []string {
	var missing []string
	for path, typ := range documented {
		if got[path] != typ {
			missing = append(missing, fmt.Sprintf("%s (%s, got %q)", path, typ, got[path]))
		}
	}
	sort.Strings(missing)
	return missing
}
