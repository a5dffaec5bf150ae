package engine

import (
	"testing"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
)

// TestEngineFillsHostAccounts: an inline spec naming no account takes its
// host's inventory account (ansible_become_user); one naming an account, a
// registered spec and a host without one are left alone, and the caller's
// specs are not edited.
func TestEngineFillsHostAccounts(t *testing.T) {
	inv, err := inventory.New("", inventory.Host{}, nil, []inventory.Host{{IP: "10.0.0.1", Account: "app"}, {IP: "10.0.0.2"}})
	if err != nil {
		t.Fatal(err)
	}
	bare, named := proc.Spec{ProcName: "p"}, proc.Spec{ProcName: "p", Account: "svc"}
	items := []proc.Item{
		{Target: proc.Target{IP: "10.0.0.1"}, Spec: &bare},
		{Target: proc.Target{IP: "10.0.0.1"}, Spec: &named},
		{Target: proc.Target{IP: "10.0.0.1"}},
		{Target: proc.Target{IP: "10.0.0.2"}, Spec: &bare},
		{Target: proc.Target{IP: "10.9.9.9"}, Spec: &bare},
	}
	got := (&Engine{Inventory: inv}).withAccounts(items)
	want := []string{"app", "svc", "", "", ""}
	for i, it := range got {
		acct := ""
		if it.Spec != nil {
			acct = it.Spec.Account
		}
		if acct != want[i] {
			t.Errorf("item %d: account %q, want %q", i, acct, want[i])
		}
	}
	if bare.Account != "" || items[0].Spec != &bare {
		t.Fatal("the caller's items were edited")
	}
	if got := (&Engine{}).withAccounts(items); &got[0] != &items[0] {
		t.Fatal("without an inventory the items pass as they are")
	}
}
