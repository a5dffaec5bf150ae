package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-sh/drover/proc"
)

const sample = `known_hosts: known_hosts
defaults:
  user: deploy
  identity_file: keys/id
  labels: {env: prod}
clouds:
  "3":
    bastion: jump@10.3.0.1
hosts:
  - {ip: 10.0.0.1, bk_cloud_id: 0, bk_supplier_id: 0, groups: [web], labels: {role: fe}}
  - {ip: 10.0.0.2, bk_cloud_id: 0, bk_supplier_id: 0, groups: [db], user: root, port: 2222}
  - {ip: 10.3.0.7, bk_cloud_id: 3, bk_supplier_id: 1, address: nat.example, groups: [web]}
  - {ip: 10.0.0.1, bk_cloud_id: 3, bk_supplier_id: 0}
`

func load(t *testing.T, text string) (*Inventory, string, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := Load(path)
	return inv, dir, err
}

func TestLoadAppliesDefaultsAndClouds(t *testing.T) {
	inv, dir, err := load(t, sample)
	if err != nil {
		t.Fatal(err)
	}
	if inv.KnownHosts() != filepath.Join(dir, "known_hosts") {
		t.Fatalf("relative known_hosts must resolve against the file: %s", inv.KnownHosts())
	}
	h, ok := inv.Lookup(proc.HostID{IP: "10.0.0.1"})
	if !ok || h.User != "deploy" || h.Port != 22 || h.Transport != TransportSSH || h.IdentityFile != filepath.Join(dir, "keys/id") ||
		h.Labels["env"] != "prod" || h.Labels["role"] != "fe" || h.DialAddress() != "10.0.0.1:22" || h.Bastion != nil {
		t.Fatalf("host 1: %+v", h)
	}
	if h, _ := inv.Lookup(proc.HostID{IP: "10.0.0.2"}); h.User != "root" || h.DialAddress() != "10.0.0.2:2222" {
		t.Fatalf("host 2 keeps its own settings: %+v", h)
	}
	h, _ = inv.Lookup(proc.HostID{CloudID: 3, IP: "10.3.0.7"})
	if h.DialAddress() != "nat.example:22" || h.Bastion == nil || h.Bastion.User != "jump" || h.Bastion.Address != "10.3.0.1:22" ||
		h.Bastion.IdentityFile != h.IdentityFile {
		t.Fatalf("cloud 3 host: %+v %+v", h, h.Bastion)
	}
	// Identity is (cloud, ip): the same ip in two cloud areas is two hosts.
	if _, ok := inv.Lookup(proc.HostID{CloudID: 3, IP: "10.0.0.1"}); !ok || len(inv.Hosts()) != 4 {
		t.Fatal("(cloud, ip) must identify a host")
	}
}

func TestSelect(t *testing.T) {
	inv, _, err := load(t, sample)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"all":                     "10.0.0.1 10.0.0.2 10.3.0.7 10.0.0.1",
		"group:web":               "10.0.0.1 10.3.0.7",
		"label:role=fe":           "10.0.0.1",
		"10.0.0.2":                "10.0.0.2",
		"3:10.0.0.1":              "10.0.0.1",
		"group:db, group:web":     "10.0.0.1 10.0.0.2 10.3.0.7",
		"label:env=prod,10.0.0.2": "10.0.0.1 10.0.0.2 10.3.0.7 10.0.0.1",
	}
	for sel, want := range cases {
		hosts, err := inv.Select(sel)
		if err != nil {
			t.Fatalf("%q: %v", sel, err)
		}
		var got []string
		for _, h := range hosts {
			got = append(got, h.IP)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%q: %v, want %s", sel, got, want)
		}
	}
	if _, err := inv.Select("group:nope"); err == nil || !strings.Contains(err.Error(), "group:nope") {
		t.Fatalf("a term matching nothing must be named: %v", err)
	}
}

func TestLoadRejects(t *testing.T) {
	cases := map[string]string{
		"hosts[0]: ip":        "hosts: [{ip: not-an-ip, bk_cloud_id: 0}]",
		"hosts[0]: port":      "hosts: [{ip: 10.0.0.1, port: 70000}]",
		"hosts[0]: transport": "hosts: [{ip: 10.0.0.1, transport: telnet}]",
		"hosts[1]: duplicate": "hosts: [{ip: 10.0.0.1}, {ip: 10.0.0.1}]",
		"clouds.x":            "clouds: {x: {bastion: a@b}}\nhosts: []",
		"clouds.1.bastion":    "clouds: {\"1\": {bastion: nouser}}\nhosts: []",
	}
	for want, text := range cases {
		if _, _, err := load(t, text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v should mention %q", text, err, want)
		}
	}
}

func TestWinRMHostDefaultsAndRefusals(t *testing.T) {
	inv, dir, err := load(t, `defaults: {user: root, port: 22, password_env: PW}
hosts:
  - {ip: 10.0.1.1, transport: winrm, user: Administrator}
  - {ip: 10.0.1.2, transport: winrm, https: true, ca_file: ca.pem, auth: ntlm}
  - {ip: 10.0.1.3, transport: winrm, https: true, insecure: true, port: 15986}
  - {ip: 10.0.1.4}
`)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := inv.Lookup(proc.HostID{IP: "10.0.1.1"})
	// The defaults' port 22 is the SSH port: a WinRM host gets 5985.
	if h.Port != 5985 || h.HTTPS || h.Auth != AuthBasic || h.User != "Administrator" || h.PasswordEnv != "PW" {
		t.Fatalf("http winrm host: %+v", h)
	}
	h, _ = inv.Lookup(proc.HostID{IP: "10.0.1.2"})
	if h.Port != 5986 || !h.HTTPS || h.Insecure || h.CAFile != filepath.Join(dir, "ca.pem") || h.Auth != AuthNTLM {
		t.Fatalf("https winrm host: %+v", h)
	}
	if h, _ := inv.Lookup(proc.HostID{IP: "10.0.1.3"}); h.Port != 15986 || !h.Insecure {
		t.Fatalf("explicit port and insecure: %+v", h)
	}
	if h, _ := inv.Lookup(proc.HostID{IP: "10.0.1.4"}); h.Port != 22 || h.Transport != TransportSSH || h.Auth != "" {
		t.Fatalf("ssh host next to winrm hosts: %+v", h)
	}

	for _, c := range []struct{ host, want string }{
		{`{ip: 10.0.1.1, transport: winrm}`, "hosts[0]: password_env: required"},
		{`{ip: 10.0.1.1, transport: winrm, password_env: PW, auth: kerberos}`, `hosts[0]: auth "kerberos": must be "basic" or "ntlm"`},
		{`{ip: 10.0.1.1, transport: winrm, password_env: PW, insecure: true}`, "hosts[0]: insecure/ca_file: only with https"},
		{`{ip: 10.0.1.1, transport: winrm, password_env: PW, https: true, insecure: true, ca_file: ca.pem}`, "hosts[0]: insecure: cannot be combined with ca_file"},
		{`{ip: 10.0.1.1, https: true}`, `hosts[0]: https: only for transport "winrm" hosts`},
		{`{ip: 10.0.1.1, ca_file: ca.pem}`, `hosts[0]: ca_file: only for transport "winrm" hosts`},
		{`{ip: 10.0.1.1, transport: rdp}`, `hosts[0]: transport "rdp": must be "ssh", "winrm" or "simulated"`},
		{`{ip: 10.0.1.1, transport: winrm, password_env: PW, certificate_file: c.pub}`, `hosts[0]: certificate_file: only for transport "ssh" hosts, this one is "winrm"`},
	} {
		_, _, err := load(t, "hosts:\n  - "+c.host+"\n")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.host, err, c.want)
		}
	}
}

func TestPassphraseEnvFollowsItsKey(t *testing.T) {
	inv, _, err := load(t, `known_hosts: kh
defaults: {identity_file: /keys/shared, passphrase_env: DROVER_SHARED_PASS}
hosts:
  - {ip: 10.0.0.1, bk_cloud_id: 0, bk_supplier_id: 0}
  - {ip: 10.0.0.2, bk_cloud_id: 0, bk_supplier_id: 0, identity_file: /keys/own}
  - {ip: 10.0.0.3, bk_cloud_id: 0, bk_supplier_id: 0, identity_file: /keys/own, passphrase_env: DROVER_OWN_PASS}
`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"10.0.0.1": "DROVER_SHARED_PASS", "10.0.0.2": "", "10.0.0.3": "DROVER_OWN_PASS"}
	for _, h := range inv.Hosts() {
		if h.PassphraseEnv != want[h.IP] {
			t.Errorf("%s: passphrase_env %q, want %q", h.IP, h.PassphraseEnv, want[h.IP])
		}
	}
}

// TestCertificateFileFollowsItsKey: certificate_file is inherited with the
// key it certifies, resolved like the key's path, and never by a WinRM host.
func TestCertificateFileFollowsItsKey(t *testing.T) {
	inv, dir, err := load(t, `known_hosts: kh
defaults: {identity_file: /keys/shared, certificate_file: certs/shared-cert.pub, password_env: PW}
clouds:
  "3": {bastion: jump@10.3.0.1}
  "4": {bastion: jump@10.4.0.1, identity_file: /keys/jump, certificate_file: /certs/jump-cert.pub}
hosts:
  - {ip: 10.0.0.1}
  - {ip: 10.0.0.2, identity_file: /keys/own}
  - {ip: 10.0.0.3, identity_file: /keys/own, certificate_file: /certs/own-cert.pub}
  - {ip: 10.0.0.4, transport: winrm}
  - {ip: 10.3.0.1, bk_cloud_id: 3}
  - {ip: 10.4.0.1, bk_cloud_id: 4}
`)
	if err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "certs/shared-cert.pub")
	want := map[string]string{"10.0.0.1": shared, "10.0.0.2": "", "10.0.0.3": "/certs/own-cert.pub", "10.0.0.4": "", "10.3.0.1": shared, "10.4.0.1": shared}
	bastion := map[string]string{"10.3.0.1": shared, "10.4.0.1": "/certs/jump-cert.pub"}
	for _, h := range inv.Hosts() {
		if h.CertificateFile != want[h.IP] {
			t.Errorf("%s: certificate_file %q, want %q", h.IP, h.CertificateFile, want[h.IP])
		}
		if h.Bastion != nil && h.Bastion.CertificateFile != bastion[h.IP] {
			t.Errorf("%s: bastion certificate_file %q, want %q", h.IP, h.Bastion.CertificateFile, bastion[h.IP])
		}
	}

	for _, c := range []struct{ text, want string }{
		{"hosts: [{ip: 10.0.0.1, identity_file: /k/id, certificate_file: /k/id}]", "hosts[0]: certificate_file /k/id: is the identity_file; want its certificate"},
		{"clouds: {\"3\": {bastion: j@h, identity_file: /k/id, certificate_file: /k/id}}\nhosts: []", "clouds.3.certificate_file /k/id: is the identity_file"},
	} {
		if _, _, err := load(t, c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.text, err, c.want)
		}
	}
}

func TestByAgentID(t *testing.T) {
	inv, _, err := load(t, `hosts:
  - {ip: 10.0.0.1, bk_cloud_id: 0, agent_id: 0200000000005254001e8a8b1690000000a1}
  - {ip: 10.0.0.2, bk_cloud_id: 2}
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   string
		want string // ip, or "" for not found
	}{
		{"0200000000005254001e8a8b1690000000a1", "10.0.0.1"},
		{"2:10.0.0.2", "10.0.0.2"}, // the cloud:ip form needs no agent_id
		{"0:10.0.0.1", "10.0.0.1"},
		{"0:10.0.0.2", ""}, // wrong cloud
		{"02:10.0.0.2", ""},
		{"ffff", ""},
		{"", ""},
	} {
		h, ok := inv.ByAgentID(c.id)
		if ok != (c.want != "") || h.IP != c.want {
			t.Errorf("ByAgentID(%q) = %s, %v; want %q", c.id, h.IP, ok, c.want)
		}
	}
}

func TestAgentIDRejects(t *testing.T) {
	for _, c := range []struct{ hosts, want string }{
		{"  - {ip: 10.0.0.1, bk_cloud_id: 0, agent_id: a}\n  - {ip: 10.0.0.2, bk_cloud_id: 0, agent_id: a}", `hosts[1]: agent_id "a" is already the id of host 0:10.0.0.1`},
		{"  - {ip: 10.0.0.1, bk_cloud_id: 0, agent_id: '0:10.0.0.1'}", "must not contain ':'"},
		{"  - {ip: 10.0.0.1, bk_cloud_id: 0, agent_id: " + strings.Repeat("a", 65) + "}", "is 65 bytes; at most 64"},
	} {
		_, _, err := load(t, "hosts:\n"+c.hosts+"\n")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.hosts, err, c.want)
		}
	}
}

func TestSelectBareWords(t *testing.T) {
	inv, _, err := load(t, `hosts:
  - {ip: 10.0.0.1, bk_cloud_id: 0, groups: [web], agent_id: web-agent}
  - {ip: 10.0.0.2, bk_cloud_id: 0, groups: [db, both]}
  - {ip: 10.0.0.3, bk_cloud_id: 0, groups: [web], agent_id: both}
  - {ip: 10.0.0.4, bk_cloud_id: 2, groups: [10.0.0.1]}
`)
	if err != nil {
		t.Fatal(err)
	}
	for sel, want := range map[string]string{
		"web":                  "10.0.0.1 10.0.0.3", // a group, as Ansible's --limit web
		"10.0.0.2":             "10.0.0.2",
		"web-agent":            "10.0.0.1", // an agent id
		"agent:both":           "10.0.0.3",
		"agent:2:10.0.0.4":     "10.0.0.4", // GSE 2.0's cloud:ip agent id
		"group:both":           "10.0.0.2",
		"2:10.0.0.4":           "10.0.0.4",
		"group:10.0.0.1,db":    "10.0.0.2 10.0.0.4",
		"web, agent:web-agent": "10.0.0.1 10.0.0.3",
		" 10.0.0.2 , db":       "10.0.0.2",
	} {
		hosts, err := inv.Select(sel)
		if err != nil {
			t.Errorf("%q: %v", sel, err)
			continue
		}
		var got []string
		for _, h := range hosts {
			got = append(got, h.IP)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%q: %v, want %s", sel, got, want)
		}
	}
	for sel, want := range map[string]string{
		"both":        `term "both" is ambiguous, it matches group both (0:10.0.0.2) and agent id both (0:10.0.0.3); write group:both, CLOUD:IP or agent:both`,
		"10.0.0.1":    `term "10.0.0.1" is ambiguous, it matches group 10.0.0.1 (2:10.0.0.4) and ip 10.0.0.1 (0:10.0.0.1)`,
		"webb":        `term "webb" matches no group, ip or agent id in the inventory`,
		"agent:nope":  `term "agent:nope" matches no inventory host`,
		"3:10.0.0.1":  `term "3:10.0.0.1" matches no inventory host`,
		"web,group:x": `term "group:x" matches no inventory host`,
	} {
		if _, err := inv.Select(sel); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", sel, err, want)
		}
	}
	if got := strings.Join(inv.Groups(), ","); got != "10.0.0.1,both,db,web" {
		t.Errorf("groups: %s", got)
	}
}
