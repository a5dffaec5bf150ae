package inventory

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-sh/drover/proc"
)

// withSource loads an inventory whose only hosts come from one source.
func withSource(t *testing.T, format, file string, extra string) (*Inventory, string, error) {
	t.Helper()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	return load(t, "known_hosts: known_hosts\ndefaults: {user: root, identity_file: keys/id}\nsources:\n"+
		"  - {format: "+format+", file: "+abs+extra+"}\n")
}

func names(hosts []Host) string {
	ips := make([]string, len(hosts))
	for i, h := range hosts {
		ips[i] = h.IP
	}
	return strings.Join(ips, " ")
}

// TestAnsibleINI reads what ansible-inventory printed for an INI
// inventory: hosts in Ansible's order, groups through children, the mapped
// variables, and one warning naming the ignored ones.
func TestAnsibleINI(t *testing.T) {
	inv, dir, err := withSource(t, "ansible", "testdata/ansible/hosts.ini.json", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(inv.Hosts()); got != "10.8.0.5 10.0.0.11 10.0.0.12 10.0.0.13 10.0.0.21" {
		t.Fatalf("order: %s", got)
	}
	web1, _ := inv.Lookup(proc.HostID{IP: "10.0.0.11"})
	if web1.User != "root" || web1.Port != 22 || web1.Address != "" || !reflect.DeepEqual(web1.Groups, []string{"app", "web"}) ||
		web1.IdentityFile != filepath.Join(dir, "keys/id") {
		t.Fatalf("web1 takes the defaults and its groups: %+v", web1)
	}
	if web2, _ := inv.Lookup(proc.HostID{IP: "10.0.0.12"}); web2.User != "deploy" || web2.DialAddress() != "10.0.0.12:2222" {
		t.Fatalf("web2: %+v", web2)
	}
	if h, ok := inv.Lookup(proc.HostID{IP: "10.0.0.13"}); !ok || h.Address != "" {
		t.Fatalf("a host named by its address: %+v", h)
	}
	db1, _ := inv.Lookup(proc.HostID{IP: "10.0.0.21"})
	if db1.Account != "mysql" || db1.IdentityFile != filepath.Join(dir, "keys/db_ed25519") {
		t.Fatalf("db1: %+v", db1)
	}
	edge, _ := inv.Lookup(proc.HostID{IP: "10.8.0.5"})
	if edge.Bastion == nil || *edge.Bastion != (Bastion{User: "jump", Address: "10.8.0.1:2200", IdentityFile: edge.IdentityFile}) {
		t.Fatalf("edge1's ProxyJump is its bastion: %+v", edge.Bastion)
	}
	if hosts, err := inv.Select("app"); err != nil || names(hosts) != "10.0.0.11 10.0.0.12 10.0.0.13 10.0.0.21" {
		t.Fatalf("group app holds its children's hosts: %s %v", names(hosts), err)
	}
	w := inv.Warnings()
	if len(w) != 1 || !strings.HasSuffix(w[0], "ignored variables ansible_connection, ansible_ssh_common_args other than ProxyJump, http_port") ||
		!strings.Contains(w[0], "sources[0] (ansible ") {
		t.Fatalf("warnings: %q", w)
	}
}

// TestAnsibleYAML reads a YAML inventory's output: all's own hosts are
// ungrouped, a -J jump host without a user logs in as the host does.
func TestAnsibleYAML(t *testing.T) {
	inv, _, err := withSource(t, "ansible", "testdata/ansible/hosts.yaml.json", ", bk_cloud_id: 4")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(inv.Hosts()); got != "10.1.0.9 10.1.0.1 10.1.0.2 10.1.0.3" {
		t.Fatalf("order: %s", got)
	}
	be1, ok := inv.Lookup(proc.HostID{CloudID: 4, IP: "10.1.0.3"})
	if !ok || be1.Account != "app" || be1.User != "ops" || be1.Bastion == nil || be1.Bastion.User != "ops" ||
		be1.Bastion.Address != "bastion.example:2022" {
		t.Fatalf("be1 in cloud 4: %+v %+v", be1, be1.Bastion)
	}
	if fe2, _ := inv.Lookup(proc.HostID{CloudID: 4, IP: "10.1.0.2"}); !reflect.DeepEqual(fe2.Groups, []string{"canary", "frontend"}) {
		t.Fatalf("fe2's groups: %v", fe2.Groups)
	}
	if lone, _ := inv.Lookup(proc.HostID{CloudID: 4, IP: "10.1.0.9"}); !reflect.DeepEqual(lone.Groups, []string{"ungrouped"}) {
		t.Fatalf("lone's groups: %v", lone.Groups)
	}
	if w := inv.Warnings(); len(w) != 1 || !strings.HasSuffix(w[0], "ignored variables java_home") {
		t.Fatalf("warnings: %q", w)
	}
}

// TestAnsibleOutputIsCurrent runs ansible-inventory, where it is
// installed, on the inventories under testdata and compares its output
// with the committed JSON the other tests read.
func TestAnsibleOutputIsCurrent(t *testing.T) {
	bin, err := exec.LookPath("ansible-inventory")
	if err != nil {
		t.Skip("ansible-inventory is not installed (apt-get install ansible-core); the committed output is used")
	}
	for _, src := range []string{"hosts.ini", "hosts.yaml", "e2e.ini"} {
		cmd := exec.Command(bin, "-i", src, "--list")
		cmd.Dir = "testdata/ansible"
		cmd.Env = append(os.Environ(), "ANSIBLE_INVENTORY_UNPARSED_WARNING=False")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		committed, err := os.ReadFile(filepath.Join("testdata/ansible", src+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(committed, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: ansible-inventory now prints\n%s\nregenerate testdata/ansible/%s.json", src, out, src)
		}
	}
}

func TestAnsibleRejects(t *testing.T) {
	cases := map[string]struct{ doc, want string }{
		"export": {`{"all":{"children":["web"]},"web":{"hosts":["a"],"vars":{"x":1}},"_meta":{"hostvars":{"a":{"ansible_host":"10.0.0.1"}}}}`,
			"web.vars: group variables are not merged into hosts; run ansible-inventory --list without --export"},
		"dns": {`{"all":{"hosts":["web.example"]},"_meta":{"hostvars":{"web.example":{"ansible_host":"web.example"}}}}`,
			`_meta.hostvars.web.example.ansible_host: "web.example" is not an IP address`},
		"proxycommand": {`{"all":{"hosts":["10.0.0.1"]},"_meta":{"hostvars":{"10.0.0.1":{"ansible_ssh_common_args":"-o ProxyCommand=\"ssh -W %h:%p j\""}}}}`,
			"_meta.hostvars.10.0.0.1.ansible_ssh_common_args: ProxyCommand: not supported"},
		"two jumps": {`{"all":{"hosts":["10.0.0.1"]},"_meta":{"hostvars":{"10.0.0.1":{"ansible_ssh_common_args":"-J a@j1,b@j2"}}}}`,
			`ansible_ssh_common_args: ProxyJump "a@j1,b@j2": one jump host only`},
		"port": {`{"all":{"hosts":["10.0.0.1"]},"_meta":{"hostvars":{"10.0.0.1":{"ansible_port":"ssh"}}}}`,
			`_meta.hostvars.10.0.0.1.ansible_port: "ssh": must be a port number`},
		"range": {`{"all":{"hosts":["10.0.0.1"]},"_meta":{"hostvars":{"10.0.0.1":{"ansible_port":70000}}}}`,
			`host "10.0.0.1": port 70000: must be 1..65535`},
		"account": {`{"all":{"hosts":["10.0.0.1"]},"_meta":{"hostvars":{"10.0.0.1":{"ansible_become_user":"-x"}}}}`,
			`host "10.0.0.1": account: "-x" is not a user name`},
		"not ansible": {`{"hosts":[]}`, "all: missing; not the JSON of ansible-inventory --list"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "a.json")
			if err := os.WriteFile(file, []byte(c.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := withSource(t, "ansible", file, "")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "sources[0]") {
				t.Fatalf("got %v, want it to name sources[0] and %q", err, c.want)
			}
		})
	}
}

func TestProxyJumpForms(t *testing.T) {
	cases := map[string]string{
		"-o ProxyJump=u@h:2":                  "u@h:2",
		`-o "ProxyJump u@h"`:                  "u@h:22",
		"-oProxyJump=ssh://u@h:3":             "u@h:3",
		"-J u@[fd00::1]:4 -C":                 "u@[fd00::1]:4",
		"-Ju@h":                               "u@h:22",
		"-o StrictHostKeyChecking=no":         "",
		"-o ProxyJump=none":                   "",
		"-o proxyjump=u@h -o Compression=yes": "u@h:22",
	}
	for args, want := range cases {
		b, _, err := proxyJump(args)
		got := ""
		if b != nil {
			got = b.User + "@" + b.Address
		}
		if err != nil || got != want {
			t.Errorf("%s: got %q %v, want %q", args, got, err, want)
		}
	}
}

// TestCMDBTopo reads list_biz_hosts_topo's whole response: the first inner
// ip is the identity, sets and modules are groups, logins are the
// defaults.
func TestCMDBTopo(t *testing.T) {
	inv, dir, err := withSource(t, "cmdb", "testdata/cmdb/list_biz_hosts_topo.json", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(inv.Hosts()); got != "10.2.0.1 10.2.0.2 10.2.0.3" {
		t.Fatalf("hosts: %s", got)
	}
	h, ok := inv.ByAgentID("0200000000000000000000000000000101")
	if !ok || h.IP != "10.2.0.1" || h.User != "root" || h.IdentityFile != filepath.Join(dir, "keys/id") ||
		!reflect.DeepEqual(h.Groups, []string{"game", "game/gamesvr", "game/proxy", "gamesvr", "proxy"}) || h.Labels["bk_host_id"] != "101" {
		t.Fatalf("game-01 by its agent id: %+v", h)
	}
	if _, ok := inv.Lookup(proc.HostID{CloudID: 2, IP: "10.2.0.2"}); !ok {
		t.Fatal("game-02 is in cloud area 2")
	}
	if hosts, err := inv.Select("group:game/gamesvr"); err != nil || names(hosts) != "10.2.0.1 10.2.0.2" {
		t.Fatalf("set/module group: %s %v", names(hosts), err)
	}
	if hosts, err := inv.Select("空闲机"); err != nil || names(hosts) != "10.2.0.3" {
		t.Fatalf("module group: %s %v", names(hosts), err)
	}
	if len(inv.Warnings()) != 0 {
		t.Fatalf("a CMDB record's other fields are no warning: %q", inv.Warnings())
	}
}

// TestCMDBFlat reads a list without topology, as list_hosts_without_biz's
// data: no groups, addresses trimmed.
func TestCMDBFlat(t *testing.T) {
	inv, _, err := withSource(t, "cmdb", "testdata/cmdb/list_hosts_without_biz.json", "")
	if err != nil {
		t.Fatal(err)
	}
	h, ok := inv.Lookup(proc.HostID{IP: "10.3.0.2"})
	if !ok || len(h.Groups) != 0 || h.AgentID != "" || names(inv.Hosts()) != "10.3.0.1 10.3.0.2" {
		t.Fatalf("hosts %s; 10.3.0.2: %+v", names(inv.Hosts()), h)
	}
}

func TestCMDBRejects(t *testing.T) {
	cases := map[string]struct{ doc, want string }{
		"refused":   {`{"result":false,"code":1199000,"message":"no permission","data":null}`, `result: false: the CMDB answered "no permission"`},
		"no cloud":  {`[{"bk_host_innerip":"10.0.0.1"}]`, "[0].bk_cloud_id: missing"},
		"no ip":     {`{"info":[{"host":{"bk_cloud_id":0,"bk_host_innerip":""}}]}`, "info[0].host.bk_host_innerip: empty"},
		"bad ip":    {`{"info":[{"bk_cloud_id":0,"bk_host_innerip":"web"}]}`, `info[0] (bk_host_innerip web): ip "web": must be an IPv4 or IPv6 address`},
		"duplicate": {`[{"bk_cloud_id":0,"bk_host_innerip":"10.0.0.1"},{"bk_cloud_id":0,"bk_host_innerip":"10.0.0.1,10.0.0.2"}]`, "[1] (bk_host_innerip 10.0.0.1): duplicate host bk_cloud_id=0 ip=10.0.0.1, also sources[0]"},
		"shape":     {`{"data":{"list":[]}}`, "data.info: missing"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "c.json")
			if err := os.WriteFile(file, []byte(c.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := withSource(t, "cmdb", file, "")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

func TestSourceRejects(t *testing.T) {
	for text, want := range map[string]string{
		"sources: [{format: nodeman, file: x.json}]": `sources[0]: format "nodeman": must be "ansible" or "cmdb"`,
		"sources: [{format: cmdb}]":                  "sources[0]: file: required",
		"sources: [{format: cmdb, file: none.json}]": "sources[0]: file: open ",
	} {
		_, dir, err := load(t, text)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), filepath.Join(dir, "inventory.yaml")) {
			t.Errorf("%s: got %v, want the file and %q", text, err, want)
		}
	}
}
