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

// complete asks for the completions of the last argument, as a shell
// does, with the inventory and an unreachable Temporal set before it.
func complete(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(path, []byte(testInventory), 0o644); err != nil {
		t.Fatal(err)
	}
	full := append([]string{"__complete", args[0], "--inventory", path, "--temporal-address", "127.0.0.1:1"}, args[1:]...)
	var out, errOut bytes.Buffer
	code := Execute(full, &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestCompletion(t *testing.T) {
	out, _, code := complete(t, "status", "--hosts", "w")
	if code != ExitOK || !strings.HasPrefix(out, "web\n") || !strings.Contains(out, ":6\n") {
		t.Fatalf("--hosts w: exit %d\n%s", code, out)
	}
	// After a comma, the next term completes with what came before.
	out, _, _ = complete(t, "ps", "--hosts", "web,group:d")
	if lines := strings.Split(out, "\n"); lines[0] != "web,group:db" || !strings.HasPrefix(lines[1], ":") {
		t.Fatalf("--hosts web,group:d:\n%s", out)
	}
	out, _, _ = complete(t, "hosts", "--hosts", "agent:")
	if !strings.HasPrefix(out, "agent:0200000000005254001e8a8b1690000000a1\n") {
		t.Fatalf("--hosts agent:\n%s", out)
	}
	out, _, _ = complete(t, "ps", "--state", "")
	if !strings.HasPrefix(out, "running\nstopped\nfailed\n") {
		t.Fatalf("--state:\n%s", out)
	}
	// Without a reachable Temporal, namespaces complete to nothing, quickly.
	out, _, code = complete(t, "ps", "--namespace", "")
	if code != ExitOK || strings.TrimSpace(out) != ":4" {
		t.Fatalf("--namespace with Temporal down: exit %d\n%s", code, out)
	}
}
