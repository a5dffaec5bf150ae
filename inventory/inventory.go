// Package inventory loads the host inventory: which hosts exist, how to reach
// them and which credentials (by reference) to use. A host is identified by
// (bk_cloud_id, ip), the GSE identity.
package inventory

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"github.com/drover-sh/drover/proc"
)

// Transport names how drover reaches a host.
const (
	TransportSSH   = "ssh"
	TransportWinRM = "winrm"
	// TransportSimulated is a host the worker answers in-process, as a
	// Linux host would (transport.Simulated): for benchmarks at fleet
	// sizes one machine's sshd cannot serve, never for real hosts.
	TransportSimulated = "simulated"
)

// WinRM authentication schemes.
const (
	AuthBasic = "basic"
	AuthNTLM  = "ntlm"
)

// Host is one inventory entry after defaults are applied.
type Host struct {
	IP         string `koanf:"ip" json:"ip"`
	CloudID    int    `koanf:"bk_cloud_id" json:"bk_cloud_id"`
	SupplierID int    `koanf:"bk_supplier_id" json:"bk_supplier_id"`
	// AgentID is the host's GSE 2.0 agent id, for callers that name hosts by
	// agent_id_list. Optional: a "<bk_cloud_id>:<ip>" id needs no entry.
	AgentID string `koanf:"agent_id" json:"agent_id,omitempty"`
	Address string `koanf:"address" json:"address,omitempty"`
	Port    int    `koanf:"port" json:"port,omitempty"`
	User    string `koanf:"user" json:"user,omitempty"`
	// Account runs the host's processes when a request names none; empty
	// is root, GSE's default.
	Account string `koanf:"account" json:"account,omitempty"`
	// IdentityFile is a path to a private key; the key itself never enters drover's inputs.
	IdentityFile string `koanf:"identity_file" json:"identity_file,omitempty"`
	// CertificateFile is a path to the OpenSSH user certificate presented
	// with the key; empty means IdentityFile's KEY-cert.pub when it exists.
	CertificateFile string `koanf:"certificate_file" json:"certificate_file,omitempty"`
	// PasswordEnv names an environment variable holding the password.
	PasswordEnv string `koanf:"password_env" json:"password_env,omitempty"`
	// PassphraseEnv names an environment variable holding the identity
	// file's passphrase, when the key is encrypted.
	PassphraseEnv string            `koanf:"passphrase_env" json:"passphrase_env,omitempty"`
	Groups        []string          `koanf:"groups" json:"groups,omitempty"`
	Labels        map[string]string `koanf:"labels" json:"labels,omitempty"`
	Transport     string            `koanf:"transport" json:"transport,omitempty"`
	// HTTPS, Insecure, CAFile and Auth are for winrm hosts: https turns
	// TLS on (default port 5986), verified against CAFile (a PEM bundle;
	// empty means the system roots) unless Insecure; Auth is basic or ntlm.
	HTTPS    bool   `koanf:"https" json:"https,omitempty"`
	Insecure bool   `koanf:"insecure" json:"insecure,omitempty"`
	CAFile   string `koanf:"ca_file" json:"ca_file,omitempty"`
	Auth     string `koanf:"auth" json:"auth,omitempty"`
	// Bastion is filled from the host's cloud area, not set per host.
	Bastion *Bastion `koanf:"-" json:"bastion,omitempty"`
}

// ID is the host's identity.
func (h Host) ID() proc.HostID { return proc.HostID{CloudID: h.CloudID, IP: h.IP} }

// DialAddress is host:port to connect to.
func (h Host) DialAddress() string {
	addr := h.Address
	if addr == "" {
		addr = h.IP
	}
	return net.JoinHostPort(addr, strconv.Itoa(h.Port))
}

// Bastion is the jump host for a cloud area.
type Bastion struct {
	User            string `json:"user"`
	Address         string `json:"address"` // host:port
	IdentityFile    string `json:"identity_file,omitempty"`
	CertificateFile string `json:"certificate_file,omitempty"`
	PasswordEnv     string `json:"password_env,omitempty"`
	PassphraseEnv   string `json:"passphrase_env,omitempty"`
}

type cloudEntry struct {
	Bastion         string `koanf:"bastion"`
	IdentityFile    string `koanf:"identity_file"`
	CertificateFile string `koanf:"certificate_file"`
	PasswordEnv     string `koanf:"password_env"`
	PassphraseEnv   string `koanf:"passphrase_env"`
}

type fileSchema struct {
	KnownHosts string                `koanf:"known_hosts"`
	Defaults   Host                  `koanf:"defaults"`
	Clouds     map[string]cloudEntry `koanf:"clouds"`
	Hosts      []Host                `koanf:"hosts"`
	Sources    []Source              `koanf:"sources"`
}

// Inventory is the validated host list. It is safe for concurrent use, and
// Replace swaps its contents whole: each reader's next call sees the new
// list, and one call never mixes the two.
type Inventory struct {
	cur atomic.Pointer[snapshot]
}

// snapshot is one loaded inventory; it is never changed once built.
type snapshot struct {
	knownHosts string
	hosts      map[proc.HostID]Host
	order      []proc.HostID
	agents     map[string]proc.HostID
	// files are the files it was read from: the inventory and its sources.
	files    []string
	warnings []string
}

var emptySnapshot = &snapshot{}

func (inv *Inventory) view() *snapshot {
	if s := inv.cur.Load(); s != nil {
		return s
	}
	return emptySnapshot
}

// Replace makes inv answer as next does from now on.
func (inv *Inventory) Replace(next *Inventory) { inv.cur.Store(next.view()) }

// KnownHosts is the known_hosts file every SSH host key is checked against.
func (inv *Inventory) KnownHosts() string { return inv.view().knownHosts }

// Files are the files the inventory was read from, the inventory file first.
func (inv *Inventory) Files() []string { return inv.view().files }

// Warnings are what the load ignored, for the log: one line per source.
func (inv *Inventory) Warnings() []string { return inv.view().warnings }

// Load reads and validates an inventory file and the host lists it names
// under sources. Relative paths inside it are resolved against the file's
// directory. Every error names the file and the field.
func Load(path string) (*Inventory, error) {
	k := koanf.New(".")
	if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("inventory %s: %w", path, err)
	}
	var fs fileSchema
	if err := k.UnmarshalWithConf("", &fs, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return nil, fmt.Errorf("inventory %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	entries := hostEntries(fs.Hosts)
	files := []string{path}
	var warnings []string
	for i, src := range fs.Sources {
		got, warn, srcPath, err := src.read(dir, i)
		if err != nil {
			return nil, fmt.Errorf("inventory %s: sources[%d]: %w", path, i, err)
		}
		entries = append(entries, got...)
		files = append(files, srcPath)
		if warn != "" {
			warnings = append(warnings, warn)
		}
	}
	s, err := build(fs, dir, entries)
	if err != nil {
		return nil, fmt.Errorf("inventory %s: %w", path, err)
	}
	s.files, s.warnings = files, warnings
	return wrap(s), nil
}

func wrap(s *snapshot) *Inventory {
	inv := &Inventory{}
	inv.cur.Store(s)
	return inv
}

// entry is one host to build, with where it came from for errors.
type entry struct {
	where string
	host  Host
}

// hostEntries are the inventory file's own hosts.
func hostEntries(hosts []Host) []entry {
	out := make([]entry, len(hosts))
	for i, h := range hosts {
		out[i] = entry{fmt.Sprintf("hosts[%d]", i), h}
	}
	return out
}

// New builds an inventory from hosts in code, applying the same defaults and
// validation as a file.
func New(knownHosts string, defaults Host, clouds map[int]Bastion, hosts []Host) (*Inventory, error) {
	fs := fileSchema{KnownHosts: knownHosts, Defaults: defaults, Hosts: hosts, Clouds: map[string]cloudEntry{}}
	for id, b := range clouds {
		fs.Clouds[strconv.Itoa(id)] = cloudEntry{Bastion: b.User + "@" + b.Address, IdentityFile: b.IdentityFile,
			CertificateFile: b.CertificateFile, PasswordEnv: b.PasswordEnv, PassphraseEnv: b.PassphraseEnv}
	}
	s, err := build(fs, ".", hostEntries(hosts))
	if err != nil {
		return nil, err
	}
	return wrap(s), nil
}

func build(fs fileSchema, dir string, entries []entry) (*snapshot, error) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "~") {
			return p
		}
		return filepath.Join(dir, p)
	}
	s := &snapshot{knownHosts: abs(fs.KnownHosts), hosts: map[proc.HostID]Host{}, agents: map[string]proc.HostID{}}
	bastions := map[int]*Bastion{}
	for id, c := range fs.Clouds {
		cloud, err := strconv.Atoi(id)
		if err != nil {
			return nil, fmt.Errorf("clouds.%s: bk_cloud_id must be an integer", id)
		}
		b, err := parseBastion(c.Bastion)
		if err != nil {
			return nil, fmt.Errorf("clouds.%s.bastion: %w", id, err)
		}
		b.IdentityFile, b.PasswordEnv, b.PassphraseEnv = abs(c.IdentityFile), c.PasswordEnv, c.PassphraseEnv
		b.CertificateFile = abs(c.CertificateFile)
		if err := validCertificateFile(b.CertificateFile, b.IdentityFile); err != nil {
			return nil, fmt.Errorf("clouds.%s.%w", id, err)
		}
		bastions[cloud] = b
	}
	where := map[proc.HostID]string{}
	for _, e := range entries {
		h := withDefaults(e.host, fs.Defaults)
		h.IdentityFile = abs(h.IdentityFile)
		h.CertificateFile = abs(h.CertificateFile)
		h.CAFile = abs(h.CAFile)
		if err := validate(h); err != nil {
			return nil, fmt.Errorf("%s: %w", e.where, err)
		}
		// A host's own bastion (an Ansible ProxyJump) wins over its cloud
		// area's; either logs in with the host's key unless it has one.
		if b, ok := bastions[h.CloudID]; ok && h.Bastion == nil {
			h.Bastion = b
		}
		if h.Bastion != nil {
			bc := *h.Bastion
			if bc.IdentityFile == "" {
				bc.IdentityFile, bc.PassphraseEnv = h.IdentityFile, h.PassphraseEnv
				if bc.CertificateFile == "" {
					bc.CertificateFile = h.CertificateFile
				}
			}
			if bc.User == "" {
				bc.User = h.User
			}
			h.Bastion = &bc
		}
		if prev, dup := where[h.ID()]; dup {
			return nil, fmt.Errorf("%s: duplicate host bk_cloud_id=%d ip=%s, also %s", e.where, h.CloudID, h.IP, prev)
		}
		where[h.ID()] = e.where
		if h.AgentID != "" {
			if prev, dup := s.agents[h.AgentID]; dup {
				return nil, fmt.Errorf("%s: agent_id %q is already the id of host %s", e.where, h.AgentID, prev)
			}
			s.agents[h.AgentID] = h.ID()
		}
		s.hosts[h.ID()] = h
		s.order = append(s.order, h.ID())
	}
	return s, nil
}

func withDefaults(h, d Host) Host {
	if h.Transport == "" {
		h.Transport = d.Transport
	}
	if h.Transport == "" {
		h.Transport = TransportSSH
	}
	// The defaults' port is for the defaults' transport: an SSH port 22
	// never becomes a WinRM host's port.
	if h.Port == 0 && (d.Transport == h.Transport || d.Transport == "" && h.Transport == TransportSSH) {
		h.Port = d.Port
	}
	if h.User == "" {
		h.User = d.User
	}
	if h.IdentityFile == "" {
		h.IdentityFile = d.IdentityFile
	}
	if h.PasswordEnv == "" {
		h.PasswordEnv = d.PasswordEnv
	}
	if h.IdentityFile == d.IdentityFile {
		// A host's own key does not inherit the default key's passphrase
		// or certificate, nor does a WinRM host, which has no key.
		if h.PassphraseEnv == "" {
			h.PassphraseEnv = d.PassphraseEnv
		}
		if h.CertificateFile == "" && h.Transport == TransportSSH {
			h.CertificateFile = d.CertificateFile
		}
	}
	h.HTTPS = h.HTTPS || d.HTTPS
	h.Insecure = h.Insecure || d.Insecure
	if h.CAFile == "" {
		h.CAFile = d.CAFile
	}
	if h.Auth == "" {
		h.Auth = d.Auth
	}
	if h.Port == 0 {
		switch {
		case h.Transport != TransportWinRM:
			h.Port = 22
		case h.HTTPS:
			h.Port = 5986
		default:
			h.Port = 5985
		}
	}
	if h.Auth == "" && h.Transport == TransportWinRM {
		h.Auth = AuthBasic
	}
	if h.User == "" {
		h.User = "root"
	}
	if h.Account == "" {
		h.Account = d.Account
	}
	if len(h.Groups) == 0 {
		h.Groups = d.Groups
	}
	if len(d.Labels) > 0 {
		merged := map[string]string{}
		for k, v := range d.Labels {
			merged[k] = v
		}
		for k, v := range h.Labels {
			merged[k] = v
		}
		h.Labels = merged
	}
	return h
}

// MaxAgentIDBytes is the longest agent id GSE callers send.
const MaxAgentIDBytes = 64

func validate(h Host) error {
	if net.ParseIP(h.IP) == nil {
		return fmt.Errorf("ip %q: must be an IPv4 or IPv6 address", h.IP)
	}
	if err := validAgentID(h.AgentID); err != nil {
		return fmt.Errorf("agent_id %q: %w", h.AgentID, err)
	}
	if err := proc.CheckAccount(h.Account); err != nil {
		return fmt.Errorf("account: %w", err)
	}
	if h.CloudID < 0 {
		return fmt.Errorf("bk_cloud_id %d: must be >= 0", h.CloudID)
	}
	if h.Port < 1 || h.Port > 65535 {
		return fmt.Errorf("port %d: must be 1..65535", h.Port)
	}
	if h.Transport != TransportSSH && h.Transport != TransportWinRM && h.Transport != TransportSimulated {
		return fmt.Errorf("transport %q: must be %q, %q or %q", h.Transport, TransportSSH, TransportWinRM, TransportSimulated)
	}
	if h.Transport != TransportWinRM {
		if err := validCertificateFile(h.CertificateFile, h.IdentityFile); err != nil {
			return err
		}
		for _, f := range []struct {
			name string
			set  bool
		}{{"https", h.HTTPS}, {"insecure", h.Insecure}, {"ca_file", h.CAFile != ""}, {"auth", h.Auth != ""}} {
			if f.set {
				return fmt.Errorf("%s: only for transport %q hosts, this one is %q", f.name, TransportWinRM, h.Transport)
			}
		}
		return nil
	}
	if h.CertificateFile != "" {
		return fmt.Errorf("certificate_file: only for transport %q hosts, this one is %q", TransportSSH, h.Transport)
	}
	if h.Auth != AuthBasic && h.Auth != AuthNTLM {
		return fmt.Errorf("auth %q: must be %q or %q", h.Auth, AuthBasic, AuthNTLM)
	}
	if h.PasswordEnv == "" {
		return fmt.Errorf("password_env: required for transport %q (WinRM logs in with a password)", TransportWinRM)
	}
	if !h.HTTPS && (h.Insecure || h.CAFile != "") {
		return fmt.Errorf("insecure/ca_file: only with https: true")
	}
	if h.Insecure && h.CAFile != "" {
		return fmt.Errorf("insecure: cannot be combined with ca_file %s (insecure skips the verification ca_file is for)", h.CAFile)
	}
	return nil
}

// validCertificateFile catches a certificate_file that names the private
// key, the likeliest slip; what the file holds is checked at each dial,
// since a renewal may replace it at any time.
func validCertificateFile(cert, identity string) error {
	if cert != "" && cert == identity {
		return fmt.Errorf("certificate_file %s: is the identity_file; want its certificate (ssh-keygen -s writes KEY-cert.pub)", cert)
	}
	return nil
}

func parseBastion(s string) (*Bastion, error) {
	user, hostport, ok := strings.Cut(s, "@")
	if !ok || user == "" {
		return nil, fmt.Errorf("%q: want user@host:port", s)
	}
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		hostport = net.JoinHostPort(hostport, "22")
	}
	return &Bastion{User: user, Address: hostport}, nil
}

// Lookup finds a host by identity.
func (inv *Inventory) Lookup(id proc.HostID) (Host, bool) {
	h, ok := inv.view().hosts[id]
	return h, ok
}

// ByAgentID finds a host by its GSE agent id: the inventory's agent_id, or
// the "<bk_cloud_id>:<ip>" form GSE 2.0 gives hosts without one.
func (inv *Inventory) ByAgentID(agentID string) (Host, bool) { return inv.view().byAgentID(agentID) }

func (s *snapshot) byAgentID(agentID string) (Host, bool) {
	if id, ok := s.agents[agentID]; ok {
		return s.hosts[id], true
	}
	if id, ok := proc.ParseCloudIP(agentID); ok {
		h, ok := s.hosts[id]
		return h, ok
	}
	return Host{}, false
}

// validAgentID keeps an id usable inside ':'-separated result keys: an
// opaque id has no ':' (that form is "<bk_cloud_id>:<ip>", which needs no
// inventory entry) and no white space.
func validAgentID(id string) error {
	switch {
	case id == "":
		return nil
	case len(id) > MaxAgentIDBytes:
		return fmt.Errorf("is %d bytes; at most %d", len(id), MaxAgentIDBytes)
	case strings.ContainsAny(id, ": \t\r\n/"):
		return fmt.Errorf("must not contain ':', '/' or white space (a \"<bk_cloud_id>:<ip>\" id needs no agent_id)")
	}
	return nil
}

// Hosts returns every host in file order, then each source's in its order.
func (inv *Inventory) Hosts() []Host { return inv.view().list() }

func (s *snapshot) list() []Host {
	out := make([]Host, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.hosts[id])
	}
	return out
}

// PasswordFrom resolves a password (or passphrase) reference at the moment
// of use.
func PasswordFrom(envName string) (string, bool) {
	if envName == "" {
		return "", false
	}
	return os.LookupEnv(envName)
}
