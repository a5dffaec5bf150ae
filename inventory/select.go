package inventory

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/drover-sh/drover/proc"
)

// Select resolves an operator's host selector, like Ansible's --limit:
// comma-separated terms, each `all`, `group:NAME`, `label:KEY=VALUE`,
// `agent:ID`, `CLOUD:IP`, or a bare word. A bare word is a group name, an
// ip or an agent id, whichever it names: operators type `--hosts web` as
// they type `--limit web`. A word that names more than one of those is
// refused rather than guessed. Hosts come back in inventory order, each once.
func (inv *Inventory) Select(selector string) ([]Host, error) {
	s := inv.view()
	want := map[proc.HostID]bool{}
	for _, term := range strings.Split(selector, ",") {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		ids, err := s.selectTerm(term)
		if err != nil {
			return nil, fmt.Errorf("hosts %q: %w", selector, err)
		}
		for _, id := range ids {
			want[id] = true
		}
	}
	var out []Host
	for _, h := range s.list() {
		if want[h.ID()] {
			out = append(out, h)
		}
	}
	return out, nil
}

// selectTerm resolves one term to the hosts it picks; picking none is an
// error that names the term.
func (inv *snapshot) selectTerm(term string) ([]proc.HostID, error) {
	var ids []proc.HostID
	switch {
	case term == "all":
		ids = inv.matching(func(Host) bool { return true })
	case strings.HasPrefix(term, "group:"):
		ids = inv.inGroup(strings.TrimPrefix(term, "group:"))
	case strings.HasPrefix(term, "label:"):
		k, v, _ := strings.Cut(strings.TrimPrefix(term, "label:"), "=")
		ids = inv.matching(func(h Host) bool { return h.Labels[k] == v })
	case strings.HasPrefix(term, "agent:"):
		if h, ok := inv.byAgentID(strings.TrimPrefix(term, "agent:")); ok {
			ids = []proc.HostID{h.ID()}
		}
	case isCloudIP(term):
		cloud, ip, _ := strings.Cut(term, ":")
		ids = inv.matching(func(h Host) bool { return strconv.Itoa(h.CloudID) == cloud && h.IP == ip })
	default:
		return inv.selectWord(term)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("term %q matches no inventory host", term)
	}
	return ids, nil
}

// selectWord resolves a bare word as a group name, an ip or an agent id.
func (inv *snapshot) selectWord(word string) ([]proc.HostID, error) {
	type meaning struct {
		what string
		ids  []proc.HostID
	}
	var found []meaning
	if ids := inv.inGroup(word); len(ids) > 0 {
		found = append(found, meaning{"group " + word, ids})
	}
	if ids := inv.matching(func(h Host) bool { return h.IP == word }); len(ids) > 0 {
		found = append(found, meaning{"ip " + word, ids})
	}
	if id, ok := inv.agents[word]; ok {
		found = append(found, meaning{"agent id " + word, []proc.HostID{id}})
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("term %q matches no group, ip or agent id in the inventory", word)
	case 1:
		return found[0].ids, nil
	}
	parts := make([]string, len(found))
	for i, m := range found {
		hosts := make([]string, len(m.ids))
		for j, id := range m.ids {
			hosts[j] = id.String()
		}
		sort.Strings(hosts)
		parts[i] = fmt.Sprintf("%s (%s)", m.what, strings.Join(hosts, ", "))
	}
	return nil, fmt.Errorf("term %q is ambiguous, it matches %s; write group:%s, CLOUD:IP or agent:%s",
		word, strings.Join(parts, " and "), word, word)
}

func (inv *snapshot) inGroup(g string) []proc.HostID {
	return inv.matching(func(h Host) bool {
		for _, hg := range h.Groups {
			if hg == g {
				return true
			}
		}
		return false
	})
}

func (inv *snapshot) matching(keep func(Host) bool) []proc.HostID {
	var out []proc.HostID
	for _, id := range inv.order {
		if keep(inv.hosts[id]) {
			out = append(out, id)
		}
	}
	return out
}

// isCloudIP reports whether term is CLOUD:IP; an IPv6 address alone is not.
func isCloudIP(term string) bool {
	cloud, ip, ok := strings.Cut(term, ":")
	if !ok || net.ParseIP(term) != nil {
		return false
	}
	_, err := strconv.Atoi(cloud)
	return err == nil && net.ParseIP(ip) != nil
}

// Groups lists every group name in the inventory, sorted.
func (inv *Inventory) Groups() []string {
	seen := map[string]bool{}
	for _, h := range inv.view().hosts {
		for _, g := range h.Groups {
			seen[g] = true
		}
	}
	out := make([]string, 0, len(seen))
	for g := range seen {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}
