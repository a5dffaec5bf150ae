package gseapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Top-level response codes. 0 and 1000115 are GSE's; the others are
// drover's, documented in docs/http-api.md.
const (
	CodeOK           = 0
	CodeBadRequest   = 1000001 // a field breaks a rule; message names it
	CodeUnauthorized = 1000002 // bk_app_code / bk_app_secret refused
	CodeTaskNotFound = 1000003 // no task with that id
	CodeForbidden    = 1000004 // the app may not touch a namespace the request names
	CodeUnavailable  = 1000503 // the workflow engine cannot be reached
	CodeInternal     = 1000500
)

// FieldError says which request field broke which rule.
type FieldError struct {
	Field string
	Rule  string
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %s: %s", e.Field, e.Rule) }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// decodeError turns encoding/json's errors into field errors. body, when
// given, lets a type error name the exact element ("hosts[3].bk_cloud_id")
// rather than encoding/json's index-free path.
func decodeError(body []byte, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := ""
		if body != nil {
			field = pathAtOffset(body, te.Offset)
		}
		if field == "" {
			field = te.Field
		}
		if field == "" {
			field = "(body)"
		}
		return &FieldError{Field: field, Rule: fmt.Sprintf("must be %s, got JSON %s", jsonKind(te.Type.Kind().String()), te.Value)}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &FieldError{Field: "(body)", Rule: fmt.Sprintf("is not valid JSON at byte %d: %v", se.Offset, se)}
	}
	if strings.Contains(err.Error(), "unexpected end of JSON") || errors.Is(err, errUnexpectedEOF) {
		return &FieldError{Field: "(body)", Rule: "is not valid JSON: unexpected end of input"}
	}
	return &FieldError{Field: "(body)", Rule: err.Error()}
}

var errUnexpectedEOF = errors.New("unexpected EOF")

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "int32", "uint", "uint64":
		return "an integer"
	case "float64", "float32":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return "a " + goKind
}
