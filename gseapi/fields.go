package gseapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/drover-sh/drover/proc"
)

// Bounds on caller-supplied values. They keep durations far from overflow
// and reject what is surely a mistake (a week-long start check), while
// staying above anything a real deployment sends.
const (
	MaxPathBytes     = 4096
	MaxCommandBytes  = 64 << 10 // control commands are shell by design
	MaxTextBytes     = 1024     // contact, func_id, instance_id, index_key
	MaxCheckSecs     = 86400    // start/stop check windows
	MaxOpTimeoutSecs = 86400    // op_timeout
	MaxPeriodSecs    = 366 * 86400
)

// Seconds converts a validated count of seconds; 0 stays 0 so that
// policies.WithDefaults can tell "not given" from a value.
func Seconds(n int) time.Duration { return time.Duration(n) * time.Second }

func hasControl(s string) bool {
	for _, c := range s {
		if unicode.IsControl(c) {
			return true
		}
	}
	return false
}

// isAbsPath accepts POSIX absolute paths and Windows ones (C:\x, C:/x,
// \\server\share): the host's OS is only known once it is reached, and
// cmd_shell_ext bat/ps1 means Windows hosts are expected.
func isAbsPath(v string) bool {
	switch {
	case strings.HasPrefix(v, "/"), strings.HasPrefix(v, `\\`):
		return true
	case len(v) >= 3 && v[1] == ':' && (v[2] == '\\' || v[2] == '/'):
		c := v[0] | 0x20
		return c >= 'a' && c <= 'z'
	}
	return false
}

// validatePath checks a path field. Control characters are refused because
// a newline in a path ends up inside a command line on the host.
func validatePath(field, v string, required bool) error {
	switch {
	case v == "" && required:
		return fieldErr(field, "is required")
	case v == "":
		return nil
	case len(v) > MaxPathBytes:
		return fieldErr(field, "is %d bytes; at most %d", len(v), MaxPathBytes)
	case hasControl(v):
		return fieldErr(field, "must not contain control characters")
	case !isAbsPath(v):
		return fieldErr(field, "must be an absolute path (/dir/file or C:\\dir\\file), got %q", v)
	}
	return nil
}

// pidFile applies the directory rule: a pid_path ending in a separator
// names the directory, and the pid file in it is <proc_name>.pid (seed 003's
// example sends "/data/var/run/nginx/").
func pidFile(pidPath, procName string) string {
	if pidPath == "" {
		return ""
	}
	switch pidPath[len(pidPath)-1] {
	case '/', '\\':
		return pidPath + procName + ".pid"
	}
	return pidPath
}

// validateProcName checks a program's file name: liveness compares it with
// the base name of the running executable, so it cannot be a path.
func validateProcName(field, v string) error {
	if err := validateNamed(field, v, 255); err != nil {
		return err
	}
	switch {
	case strings.ContainsAny(v, `/\`):
		return fieldErr(field, "must be a file name without '/' or '\\' (%q)", v)
	case hasControl(v):
		return fieldErr(field, "must not contain NUL or control characters")
	}
	return nil
}

// validateNamed checks what every name a request gives (a namespace, a
// process name, a program's file name) must be: present, at most max
// bytes, and neither "." nor "..".
func validateNamed(field, v string, max int) error {
	switch {
	case v == "":
		return fieldErr(field, "is required and must not be empty")
	case len(v) > max:
		return fieldErr(field, "is %d bytes; at most %d", len(v), max)
	case v == "." || v == "..":
		return fieldErr(field, "must not be %q", v)
	}
	return nil
}

// validateAccount checks a process's account (see proc.CheckAccount).
func validateAccount(field, v string) error {
	if err := proc.CheckAccount(v); err != nil {
		return fieldErr(field, "%v", err)
	}
	return nil
}

// shellExt validates cmd_shell_ext. Case is ignored ("SH" is what some
// Windows-side callers send); empty stays empty for the policy default.
func shellExt(field, v string) (proc.ShellExt, error) {
	switch e := proc.ShellExt(strings.ToLower(v)); e {
	case "", proc.ShellSh, proc.ShellBat, proc.ShellPS1:
		return e, nil
	}
	return "", fieldErr(field, "must be one of sh, bat, ps1, got %q", v)
}

// validateCommand checks a control command. Commands are shell by design,
// so anything goes except NUL, which no shell can carry.
func validateCommand(field, v string) error {
	if len(v) > MaxCommandBytes {
		return fieldErr(field, "is %d bytes; at most %d", len(v), MaxCommandBytes)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return fieldErr(field, "must not contain NUL")
	}
	return nil
}

// validateText checks free-text identifiers that end up in results and logs.
func validateText(field, v string) error {
	if len(v) > MaxTextBytes {
		return fieldErr(field, "is %d bytes; at most %d", len(v), MaxTextBytes)
	}
	if hasControl(v) {
		return fieldErr(field, "must not contain control characters")
	}
	return nil
}

// percent checks cpu/mem limits: a share of the whole host, ints and floats
// alike. Absent is 0, which means "no limit".
func percent(field string, v *float64) (float64, error) {
	if v == nil {
		return 0, nil
	}
	if math.IsNaN(*v) || *v < 0 || *v > 100 {
		return 0, fieldErr(field, "must be within [0, 100], got %v", *v)
	}
	return *v, nil
}

// seconds reads a count of seconds. Absent, 0 and negative all mean the
// default (a caller's 0 is documented so; a negative wait has no other
// reading). The maximum stays a refusal: it keeps a host's op queue from
// being held for days by a typo.
func seconds(field string, v *int, max int) (time.Duration, error) {
	if v == nil || *v <= 0 {
		return 0, nil
	}
	if *v > max {
		return 0, fieldErr(field, "must be at most %d seconds, got %d", max, *v)
	}
	return Seconds(*v), nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// stringOrInt reads a field documented as a string that callers also send as
// a JSON integer (ids copied from a numeric source). present is false for an
// absent or null field.
func stringOrInt(field string, raw json.RawMessage) (s string, present bool, err error) {
	t := bytes.TrimSpace(raw)
	if isNull(t) {
		return "", false, nil
	}
	switch t[0] {
	case '"':
		if err := json.Unmarshal(t, &s); err != nil {
			return "", true, fieldErr(field, "is not a valid JSON string")
		}
		return s, true, nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if _, err := strconv.ParseInt(string(t), 10, 64); err != nil {
			return "", true, fieldErr(field, "must be a string or an integer, got JSON number %s", t)
		}
		return string(t), true, nil
	}
	return "", true, fieldErr(field, "must be a string or an integer, got JSON %s", jsonValueKind(t))
}

// intOrString reads a field documented as an integer that callers also send
// as a decimal string ("bk_biz_id": "2", which ESB has always tolerated).
func intOrString(field string, raw json.RawMessage) (n int, present bool, err error) {
	s, present, err := stringOrInt(field, raw)
	if err != nil || !present {
		if err != nil {
			err = fieldErr(field, "must be an integer, got JSON %s", jsonValueKind(bytes.TrimSpace(raw)))
		}
		return 0, present, err
	}
	n, perr := strconv.Atoi(s)
	if perr != nil {
		return 0, true, fieldErr(field, "must be an integer, got %q", s)
	}
	return n, true, nil
}

func jsonValueKind(t []byte) string {
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number " + string(t)
}

// gseOp turns a GSE op_type into the domain's. Every integer is accepted
// (unknown ones are answered per host with 832), but the numbers drover
// uses internally (registry ops, the host check) must not be reachable from
// op_type, so those are moved to a negative, equally unknown, value.
func gseOp(op int) proc.OpType {
	if o := proc.OpType(op); o.IsInternal() {
		return proc.OpType(-1000 - op)
	}
	return proc.OpType(op)
}

func indexed(field string, i int) string { return fmt.Sprintf("%s[%d]", field, i) }
