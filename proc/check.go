package proc

import (
	"encoding/json"
	"strings"
)

// CheckReport is a host check's (OpCheck) content: which of its checks
// passed and which failed, in the order they ran. A check that could not
// be tried because an earlier one failed is in neither list.
type CheckReport struct {
	Address string `json:"address"`
	Login   string `json:"login"`
	// Accounts are the accounts the host's registered specs run as,
	// besides the login, each tried as ops switch to it.
	Accounts []string       `json:"accounts,omitempty"`
	Passed   []string       `json:"passed"`
	Failed   []CheckFailure `json:"failed,omitempty"`
}

// CheckFailure is one check that failed, with the code an op would have
// answered for the same failure.
type CheckFailure struct {
	Check string `json:"check"`
	// Account is set for an account's check.
	Account string `json:"account,omitempty"`
	Code    Code   `json:"error_code"`
	Message string `json:"error_msg"`
}

// Result is the report as a host's result: its first failure's code, or
// success; the message says what passed and what failed.
func (r CheckReport) Result() HostResult {
	out := HostResult{Code: CodeSuccess, Content: r.encode()}
	var msg []string
	if len(r.Failed) > 0 {
		out.Code = r.Failed[0].Code
		msg = append(msg, r.Failed[0].Message)
	}
	if len(r.Passed) > 0 {
		msg = append(msg, "passed: "+strings.Join(r.Passed, ", "))
	}
	if len(r.Failed) > 0 {
		failed := make([]string, len(r.Failed))
		for i, f := range r.Failed {
			failed[i] = f.Check
		}
		msg = append(msg, "failed: "+strings.Join(failed, ", "))
	}
	out.Message = strings.Join(msg, "; ")
	return out
}

func (r CheckReport) encode() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // plain strings and numbers
	}
	return string(b)
}

// DecodeCheckReport reads a host check's content; ok is false for a result
// that carries none (a host not in the inventory, a batch not run).
func DecodeCheckReport(content string) (CheckReport, bool) {
	var r CheckReport
	if content == "" || json.Unmarshal([]byte(content), &r) != nil {
		return CheckReport{}, false
	}
	return r, true
}
