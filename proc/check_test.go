package proc

import "testing"

func TestCheckReportResult(t *testing.T) {
	passed := CheckReport{Address: "10.0.0.1:22", Login: "root", Passed: []string{"reach 10.0.0.1:22", "host key", "login as root", "account app"}}
	r := passed.Result()
	if r.Code != CodeSuccess || r.Message != "passed: reach 10.0.0.1:22, host key, login as root, account app" {
		t.Fatalf("passed: %+v", r)
	}
	back, ok := DecodeCheckReport(r.Content)
	if !ok || back.Address != passed.Address || len(back.Passed) != 4 {
		t.Fatalf("content %q read back as %+v, %v", r.Content, back, ok)
	}

	sudo := CheckReport{Passed: []string{"reach 10.0.0.1:22", "host key", "login as ops"}, Failed: []CheckFailure{
		{Check: "account app", Account: "app", Code: CodeSudoRefused, Message: "sudo refused: a password is required"},
		{Check: "account db", Account: "db", Code: CodeSudoRefused, Message: "sudo refused: a password is required"},
	}}
	r = sudo.Result()
	want := "sudo refused: a password is required; passed: reach 10.0.0.1:22, host key, login as ops; failed: account app, account db"
	if r.Code != CodeSudoRefused || r.Message != want {
		t.Fatalf("sudo refused: %+v\nwant message %q", r, want)
	}

	unreachable := CheckReport{Failed: []CheckFailure{{Check: "reach 10.0.0.1:22", Code: CodeUnreachable, Message: "host unreachable: connection refused"}}}
	if r := unreachable.Result(); r.Code != CodeUnreachable || r.Message != "host unreachable: connection refused; failed: reach 10.0.0.1:22" {
		t.Fatalf("unreachable: %+v", r)
	}
	if _, ok := DecodeCheckReport(""); ok {
		t.Fatal("an empty content is no report")
	}
}
