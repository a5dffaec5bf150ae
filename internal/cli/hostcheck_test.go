package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/drover-sh/drover/proc"
)

func TestCheckRecapGroupsFailuresWithTheirFix(t *testing.T) {
	var items []proc.Item
	for _, ip := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"} {
		items = append(items, proc.Item{Target: proc.Target{IP: ip}})
	}
	report := func(r proc.CheckReport) proc.HostResult { return r.Result() }
	res := map[string]proc.HostResult{
		items[0].Key(): report(proc.CheckReport{Passed: []string{"reach 10.0.0.1:22"}}),
		items[1].Key(): report(proc.CheckReport{Failed: []proc.CheckFailure{{Check: "reach 10.0.0.2:22", Code: proc.CodeUnreachable, Message: "host unreachable: refused"}}}),
		items[2].Key(): report(proc.CheckReport{Failed: []proc.CheckFailure{{Check: "account app", Account: "app", Code: proc.CodeSudoRefused, Message: "sudo refused"}}}),
		items[3].Key(): report(proc.CheckReport{Failed: []proc.CheckFailure{
			{Check: "account db", Account: "db", Code: proc.CodeSudoRefused, Message: "sudo refused"},
			{Check: "account app", Account: "app", Code: proc.CodeSudoRefused, Message: "sudo refused"}}}),
		items[4].Key(): proc.Fail(proc.CodeUnknownHost, "host bk_cloud_id=0 ip=10.0.0.5 is not in the inventory"),
	}
	r := checkRecapOf("T", items, res)
	if r.Passed != 1 || r.Failed != 4 || len(r.Failures) != 3 {
		t.Fatalf("recap %+v", r)
	}
	// By code, each with its hosts and its fix; sudo's names the accounts.
	for i, want := range []struct {
		code  proc.Code
		hosts string
		fix   string
	}{
		{proc.CodeUnreachable, "0:10.0.0.2", "cannot connect"},
		{proc.CodeSudoRefused, "0:10.0.0.3,0:10.0.0.4", "sudo refused for app, db: add a sudoers rule"},
		{proc.CodeUnknownHost, "0:10.0.0.5", "not in the workers' inventory"},
	} {
		f := r.Failures[i]
		if f.Code != want.code || strings.Join(f.Hosts, ",") != want.hosts || !strings.HasPrefix(f.Fix, want.fix) {
			t.Errorf("group %d: %+v, want %d for %s fixed by %q...", i, f, want.code, want.hosts, want.fix)
		}
	}
	var b bytes.Buffer
	if err := r.print(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"0:10.0.0.2  117", "5 hosts checked: 1 passed, 4 failed", "9103 sudo refused", "2 hosts"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0:10.0.0.1 ") {
		t.Errorf("a host that passed is listed:\n%s", out)
	}
}
