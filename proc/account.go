package proc

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CheckAccount accepts a POSIX user name or a Windows account: NAME,
// DOMAIN\NAME or NAME@DOMAIN. Names are letters, digits, '_', '.', '-' and
// inner spaces, with an optional trailing '$' (machine accounts). A leading
// '-' is refused so the name can never read as an option to su or sudo.
// Empty is accepted: it means the default account.
func CheckAccount(v string) error {
	if v == "" {
		return nil
	}
	if len(v) > 256 {
		return fmt.Errorf("is %d bytes; at most 256", len(v))
	}
	name, domain, upn := v, "", false
	if i := strings.IndexByte(v, '\\'); i >= 0 {
		domain, name = v[:i], v[i+1:]
	} else if i := strings.LastIndexByte(v, '@'); i >= 0 {
		name, domain, upn = v[:i], v[i+1:], true
	}
	bad := func() error {
		return fmt.Errorf("%q is not a user name (NAME, DOMAIN\\NAME or NAME@DOMAIN; letters, digits, '_', '.', '-', inner spaces, optional trailing '$'; not starting with '-')", v)
	}
	if !accountPart(name, true) {
		return bad()
	}
	if domain == "" && v != name {
		return bad()
	}
	if domain != "" {
		if upn {
			for _, c := range domain {
				if !(c < utf8.RuneSelf && (isAlnum(byte(c)) || c == '.' || c == '-')) {
					return bad()
				}
			}
		} else if !accountPart(domain, false) {
			return bad()
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func accountPart(s string, dollar bool) bool {
	if s == "" || utf8.RuneCountInString(s) > 104 || s[0] == '-' || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	if dollar && len(s) > 1 && s[len(s)-1] == '$' {
		s = s[:len(s)-1]
	}
	for _, c := range s {
		if !(unicode.IsLetter(c) || unicode.IsDigit(c) || c == '_' || c == '.' || c == '-' || c == ' ') {
			return false
		}
	}
	return true
}
