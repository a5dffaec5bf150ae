package gseapi

import (
	"fmt"
	"net"
	"unicode"

	"github.com/drover-sh/drover/proc"
)

// HostRef is one entry of `hosts`.
type HostRef struct {
	IP      string `json:"ip"`
	CloudID *int   `json:"bk_cloud_id"`
	// SupplierID is optional: GSE 2.0 callers leave it out, and it means 0.
	SupplierID *int `json:"bk_supplier_id"`
}

// HostList is how a request names its hosts: `hosts`, or GSE 2.0's
// `agent_id_list`, which wins when both are sent (the dialect says hosts is
// then ignored).
type HostList struct {
	Hosts []HostRef `json:"hosts"`
	// AgentIDs is nil when absent or null; an empty list sent is refused.
	AgentIDs *[]string `json:"agent_id_list"`
}

// MaxAgentIDBytes bounds one agent id (GSE's ids are 36 characters).
const MaxAgentIDBytes = 64

// targets validates the list and names each host. field is the path before
// "hosts" / "agent_id_list" ("" at the top level).
func (l HostList) targets(field string) ([]proc.Target, error) {
	if l.AgentIDs != nil {
		return agentTargets(prefixPath(field, "agent_id_list"), *l.AgentIDs)
	}
	return hostTargets(prefixPath(field, "hosts"), l.Hosts)
}

// agentTargets reads agent_id_list. A "<bk_cloud_id>:<ip>" id names its
// host at once; any other id is kept to be mapped through the inventory
// (Target.Resolved false until then), and one nothing maps answers its key
// with 9104 while the rest of the request goes on.
func agentTargets(field string, ids []string) ([]proc.Target, error) {
	if len(ids) == 0 {
		return nil, fieldErr(field, "is empty; list at least one agent id (or send hosts instead)")
	}
	if len(ids) > MaxHosts {
		return nil, fieldErr(field, "lists %d agent ids; at most %d per request", len(ids), MaxHosts)
	}
	seen := make(map[string]int, len(ids))
	out := make([]proc.Target, len(ids))
	for i, id := range ids {
		f := indexed(field, i)
		switch {
		case id == "":
			return nil, fieldErr(f, "is empty")
		case len(id) > MaxAgentIDBytes:
			return nil, fieldErr(f, "is %d bytes; at most %d", len(id), MaxAgentIDBytes)
		case hasSpaceOrControl(id):
			return nil, fieldErr(f, "must not contain white space or control characters")
		}
		if j, dup := seen[id]; dup {
			return nil, fieldErr(f, "duplicates %s[%d] (%q)", field, j, id)
		}
		seen[id] = i
		out[i] = proc.Target{AgentID: id}
		if h, ok := proc.ParseCloudIP(id); ok {
			out[i].CloudID, out[i].IP = h.CloudID, h.IP
		}
	}
	return out, nil
}

func hasSpaceOrControl(s string) bool {
	for _, c := range s {
		if unicode.IsSpace(c) || unicode.IsControl(c) {
			return true
		}
	}
	return false
}

func hostTargets(field string, hosts []HostRef) ([]proc.Target, error) {
	if len(hosts) == 0 {
		return nil, fieldErr(field, "is required and must list at least one host")
	}
	if len(hosts) > MaxHosts {
		return nil, fieldErr(field, "lists %d hosts; at most %d per request", len(hosts), MaxHosts)
	}
	seen := make(map[proc.HostID]int, len(hosts))
	out := make([]proc.Target, len(hosts))
	for i, h := range hosts {
		f := fmt.Sprintf("%s[%d]", field, i)
		t, err := h.target(f)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[t.HostID()]; dup {
			return nil, fieldErr(f, "duplicates %s[%d] (bk_cloud_id %d, ip %s)", field, j, t.CloudID, t.IP)
		}
		seen[t.HostID()] = i
		out[i] = t
	}
	return out, nil
}

// target validates one host reference; an absent bk_supplier_id is 0.
func (h HostRef) target(f string) (proc.Target, error) {
	if h.IP == "" {
		return proc.Target{}, fieldErr(f+".ip", "is required")
	}
	if net.ParseIP(h.IP) == nil {
		return proc.Target{}, fieldErr(f+".ip", "%q is not an IPv4 or IPv6 address", h.IP)
	}
	if h.CloudID == nil {
		return proc.Target{}, fieldErr(f+".bk_cloud_id", "is required")
	}
	if *h.CloudID < 0 {
		return proc.Target{}, fieldErr(f+".bk_cloud_id", "must be >= 0, got %d", *h.CloudID)
	}
	sup := 0
	if h.SupplierID != nil {
		if *h.SupplierID < 0 {
			return proc.Target{}, fieldErr(f+".bk_supplier_id", "must be >= 0, got %d", *h.SupplierID)
		}
		sup = *h.SupplierID
	}
	return proc.Target{CloudID: *h.CloudID, SupplierID: sup, IP: h.IP}, nil
}

// AgentDirectory maps GSE agent ids to hosts: the inventory, where the
// request enters. An Engine that implements it has every agent id of a
// task mapped before the task starts, so each key is known from the first
// poll on.
type AgentDirectory interface {
	// AgentHost returns the host (cloud, supplier, ip) an agent id names.
	AgentHost(agentID string) (proc.Target, bool)
	// HostAgent returns a host's own agent id, "" when it has none.
	HostAgent(h proc.HostID) string
}

// agentOf is the agent id get_proc_status_v2 reports for an item: the one
// the caller sent, else the host's own from the directory, else GSE 2.0's
// "<bk_cloud_id>:<ip>".
func agentOf(e any, t proc.Target) string {
	if t.AgentID == "" && t.Resolved() {
		if dir, ok := e.(AgentDirectory); ok {
			if id := dir.HostAgent(t.HostID()); id != "" {
				return id
			}
		}
	}
	return t.AgentIDOrHost()
}

// resolveAgents maps the agent ids of items through e when it is an
// AgentDirectory. Items it cannot map keep an empty ip: their hosts answer
// 9104.
func resolveAgents(e any, items []proc.Item) {
	dir, ok := e.(AgentDirectory)
	if !ok {
		return
	}
	for i := range items {
		t := &items[i].Target
		if t.AgentID == "" {
			continue
		}
		if h, ok := dir.AgentHost(t.AgentID); ok {
			t.CloudID, t.SupplierID, t.IP = h.CloudID, h.SupplierID, h.IP
		}
	}
}
