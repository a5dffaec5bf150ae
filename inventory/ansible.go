package inventory

import (
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// ansibleGroup is a group as `ansible-inventory --list` prints it.
type ansibleGroup struct {
	Hosts    []string       `json:"hosts"`
	Children []string       `json:"children"`
	Vars     map[string]any `json:"vars"`
}

// ansibleVars are the host variables drover reads; every other is
// ignored, and named in the source's warning.
var ansibleVars = map[string]func(h *Host, v string) error{
	"ansible_host": func(h *Host, v string) error { h.Address = v; return nil },
	"ansible_port": func(h *Host, v string) error {
		p, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q: must be a port number", v)
		}
		h.Port = p
		return nil
	},
	"ansible_user":                 func(h *Host, v string) error { h.User = v; return nil },
	"ansible_ssh_private_key_file": func(h *Host, v string) error { h.IdentityFile = v; return nil },
	"ansible_become_user":          func(h *Host, v string) error { h.Account = v; return nil },
}

// sshArgsVar holds ssh's own arguments, of which drover reads the jump host.
const sshArgsVar = "ansible_ssh_common_args"

// parseAnsible reads the JSON of `ansible-inventory --list`: hosts by
// inventory hostname, in the order Ansible walks its groups from all, each
// in every group that holds it directly or through a child group.
func parseAnsible(data []byte, where string, cloud int) ([]entry, []string, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("not the JSON of ansible-inventory --list: %w", err)
	}
	if _, ok := doc["all"]; !ok {
		return nil, nil, fmt.Errorf("all: missing; not the JSON of ansible-inventory --list")
	}
	var meta struct {
		HostVars map[string]map[string]any `json:"hostvars"`
	}
	if raw, ok := doc["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, nil, fmt.Errorf("_meta: %w", err)
		}
	}
	groups := map[string]ansibleGroup{}
	for name, raw := range doc {
		if name == "_meta" {
			continue
		}
		var g ansibleGroup
		if err := json.Unmarshal(raw, &g); err != nil {
			return nil, nil, fmt.Errorf("%s: not a group (hosts and children): %w", name, err)
		}
		if len(g.Vars) > 0 {
			return nil, nil, fmt.Errorf("%s.vars: group variables are not merged into hosts; run ansible-inventory --list without --export", name)
		}
		groups[name] = g
	}
	order, memberOf := walkAnsible(groups)
	ignored := map[string]bool{}
	out := make([]entry, 0, len(order))
	for _, name := range order {
		h, err := ansibleHost(name, meta.HostVars[name], cloud, ignored)
		if err != nil {
			return nil, nil, fmt.Errorf("_meta.hostvars.%s.%w", name, err)
		}
		h.Groups = memberOf[name]
		out = append(out, entry{fmt.Sprintf("%s host %q", where, name), h})
	}
	var warn []string
	if len(ignored) > 0 {
		warn = append(warn, "variables "+strings.Join(sortedKeys(ignored), ", "))
	}
	return out, warn, nil
}

// walkAnsible lists hosts depth first from all, and each host's groups
// (all left out: every host is in it). A group outside all's tree is
// walked after it, by name.
func walkAnsible(groups map[string]ansibleGroup) ([]string, map[string][]string) {
	var order []string
	memberOf := map[string][]string{}
	seenHost := map[string]bool{}
	inGroup := map[string]map[string]bool{}
	var walk func(name string, path []string)
	visited := map[string]bool{}
	walk = func(name string, path []string) {
		for _, p := range path {
			if p == name {
				return // a cycle; Ansible refuses them, a hand-made file may not
			}
		}
		visited[name] = true
		g := groups[name]
		path = append(path, name)
		for _, h := range g.Hosts {
			if !seenHost[h] {
				seenHost[h] = true
				order = append(order, h)
			}
			for _, gn := range path {
				if gn == "all" {
					continue
				}
				if inGroup[h] == nil {
					inGroup[h] = map[string]bool{}
				}
				inGroup[h][gn] = true
			}
		}
		for _, c := range g.Children {
			walk(c, path)
		}
	}
	walk("all", nil)
	rest := make([]string, 0, len(groups))
	for name := range groups {
		if !visited[name] {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	for _, name := range rest {
		walk(name, nil)
	}
	for h, set := range inGroup {
		memberOf[h] = sortedKeys(set)
	}
	return order, memberOf
}

// ansibleHost maps one host's variables; the error starts with the
// variable's name. Its ip is the inventory hostname when that is an
// address, else ansible_host.
func ansibleHost(name string, vars map[string]any, cloud int, ignored map[string]bool) (Host, error) {
	h := Host{CloudID: cloud}
	for k, v := range vars {
		set, ok := ansibleVars[k]
		if !ok && k != sshArgsVar {
			ignored[k] = true
			continue
		}
		s, err := scalar(v)
		if err == nil && ok {
			err = set(&h, s)
		} else if err == nil {
			var other bool
			h.Bastion, other, err = proxyJump(s)
			if other {
				ignored[sshArgsVar+" other than ProxyJump"] = true
			}
		}
		if err != nil {
			return Host{}, fmt.Errorf("%s: %w", k, err)
		}
	}
	switch {
	case net.ParseIP(name) != nil:
		h.IP = name
	case net.ParseIP(h.Address) != nil:
		h.IP = h.Address
	default:
		return Host{}, fmt.Errorf("ansible_host: %q is not an IP address, nor is the host's name, and drover names hosts by (bk_cloud_id, ip)", h.Address)
	}
	if h.Address == h.IP {
		h.Address = ""
	}
	return h, nil
}

// scalar is a variable's value as text: Ansible writes ports as numbers
// or strings alike.
func scalar(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	}
	return "", fmt.Errorf("%v: must be a string or a number", v)
}

// proxyJump finds the jump host in ssh arguments: -J HOST or
// -o ProxyJump=HOST (or -o "ProxyJump HOST"), HOST being [user@]host[:port].
// Nil when there is none; other reports arguments besides it.
func proxyJump(args string) (_ *Bastion, other bool, _ error) {
	words, err := shellWords(args)
	if err != nil {
		return nil, false, err
	}
	jump := ""
	for i := 0; i < len(words); i++ {
		w := words[i]
		opt := ""
		switch {
		case w == "-J" || w == "-o":
			if i+1 == len(words) {
				return nil, other, fmt.Errorf("%s: needs a value", w)
			}
			i++
			opt = w + " " + words[i]
		case strings.HasPrefix(w, "-J") || strings.HasPrefix(w, "-o"):
			opt = w[:2] + " " + w[2:]
		default:
			other = true
			continue
		}
		flag, val := opt[:2], strings.TrimSpace(opt[3:])
		if flag == "-o" {
			key, v, _ := strings.Cut(strings.Replace(val, "=", " ", 1), " ")
			switch strings.ToLower(key) {
			case "proxyjump":
				val = strings.TrimSpace(v)
			case "proxycommand":
				return nil, other, fmt.Errorf("ProxyCommand: not supported; name the bastion with -o ProxyJump=user@host:port")
			default:
				other = true
				continue
			}
		}
		jump = val
	}
	if jump == "" || strings.EqualFold(jump, "none") {
		return nil, other, nil
	}
	if strings.Contains(jump, ",") {
		return nil, other, fmt.Errorf("ProxyJump %q: one jump host only", jump)
	}
	jump = strings.TrimPrefix(jump, "ssh://")
	user, hostport, ok := strings.Cut(jump, "@")
	if !ok {
		user, hostport = "", jump // the bastion logs in as the host does
	}
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		hostport = net.JoinHostPort(hostport, "22")
	}
	return &Bastion{User: user, Address: hostport}, other, nil
}

// shellWords splits ssh arguments as a shell would: blanks separate
// words, quotes group them.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: unbalanced quote", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
