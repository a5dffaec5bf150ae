package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testInventory = `known_hosts: known_hosts
hosts:
  - {ip: 10.0.0.1, bk_cloud_id: 0, groups: [web], agent_id: 0200000000005254001e8a8b1690000000a1}
  - {ip: 10.0.0.2, bk_cloud_id: 0, groups: [db]}
  - {ip: 10.0.0.3, bk_cloud_id: 0, groups: [web]}
`

// runStarter runs the starter in-process against an inventory of its own
// and an address where no Temporal listens.
func runStarter(t *testing.T, inventory string, args ...string) (string, string, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(path, []byte(inventory), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := Execute(append(args, "--inventory", path, "--temporal-address", "127.0.0.1:1"), &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestHostsSelectsAGroupByItsBareName(t *testing.T) {
	out, errOut, code := runStarter(t, testInventory, "hosts", "--hosts", "web")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "AGENT_ID") || !strings.Contains(lines[3], `2 of 3 hosts selected by "web"`) {
		t.Fatalf("hosts --hosts web:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[1] != "10.0.0.1" || f[2] != "0200000000005254001e8a8b1690000000a1" {
		t.Fatalf("first row must show its agent id: %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[1] != "10.0.0.3" || f[2] != "-" {
		t.Fatalf("a host without an agent id shows -: %q", lines[2])
	}
	out, _, code = runStarter(t, testInventory, "hosts", "--hosts", "agent:0200000000005254001e8a8b1690000000a1")
	if code != ExitOK || !strings.Contains(out, "1 of 3 hosts selected") || !strings.Contains(out, "10.0.0.1") {
		t.Fatalf("agent: term: exit %d\n%s", code, out)
	}
	_, errOut, code = runStarter(t, testInventory, "hosts", "--hosts", "webs")
	if code != ExitBadRequest || !strings.Contains(errOut, `term "webs" matches no group, ip or agent id`) {
		t.Fatalf("unknown word: exit %d %s", code, errOut)
	}
}
