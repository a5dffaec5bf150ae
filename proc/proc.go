// Package proc is drover's domain: what a managed process is, which host it
// lives on, what can be done to it and how each outcome is reported. It does
// no I/O, so every rule here is tested directly.
package proc

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Target identifies one host the way GSE callers do: (bk_cloud_id, ip), with
// the supplier id carried along because result keys include it.
type Target struct {
	CloudID    int    `json:"bk_cloud_id"`
	SupplierID int    `json:"bk_supplier_id"`
	IP         string `json:"ip"`
	// AgentID is the agent id the caller named the host by
	// (agent_id_list), exactly as sent; empty when it sent cloud and ip.
	// An id nothing maps to a host leaves IP empty: that item is
	// answered "host not in inventory".
	AgentID string `json:"bk_agent_id,omitempty"`
}

// AgentIDOrHost is the agent id the caller named the host by, else the
// "<bk_cloud_id>:<ip>" form GSE 2.0 gives a host without an id of its own.
func (t Target) AgentIDOrHost() string {
	if t.AgentID != "" {
		return t.AgentID
	}
	return t.HostID().String()
}

// Resolved reports whether the target names a host (an ip).
func (t Target) Resolved() bool { return t.IP != "" }

// HostID is the inventory identity of a host; the supplier id is not part of it.
type HostID struct {
	CloudID int
	IP      string
}

func (t Target) HostID() HostID { return HostID{CloudID: t.CloudID, IP: t.IP} }

func (h HostID) String() string { return strconv.Itoa(h.CloudID) + ":" + h.IP }

// ParseCloudIP reads the "<bk_cloud_id>:<ip>" form GSE 2.0 uses as the agent
// id of a host that has none of its own.
func ParseCloudIP(s string) (HostID, bool) {
	cloud, ip, ok := strings.Cut(s, ":")
	if !ok {
		return HostID{}, false
	}
	n, err := strconv.Atoi(cloud)
	if err != nil || n < 0 || cloud != strconv.Itoa(n) || net.ParseIP(ip) == nil {
		return HostID{}, false
	}
	return HostID{CloudID: n, IP: ip}, true
}

// ProcessID names a process on a host by GSE meta.
type ProcessID struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// ResultKey is the documented v1 key `bk_cloud_id:bk_supplier_id:ip:namespace:name`.
func ResultKey(t Target, p ProcessID) string {
	return fmt.Sprintf("%d:%d:%s:%s:%s", t.CloudID, t.SupplierID, t.IP, p.Namespace, p.Name)
}

// ShortResultKey is the supplier-less form `bk_cloud_id:ip:namespace:name`
// that some callers and the v2 API build.
func ShortResultKey(t Target, p ProcessID) string {
	return fmt.Sprintf("%d:%s:%s:%s", t.CloudID, t.IP, p.Namespace, p.Name)
}

// ParseResultKey accepts both the v1 and the supplier-less key forms. The
// namespace and name may not contain ':' in either form, which GSE also
// forbids implicitly by using ':' as the separator.
func ParseResultKey(key string) (Target, ProcessID, error) {
	parts := strings.Split(key, ":")
	var t Target
	var p ProcessID
	switch len(parts) {
	case 5:
		sup, err := strconv.Atoi(parts[1])
		if err != nil {
			return t, p, fmt.Errorf("result key %q: bk_supplier_id %q is not an integer", key, parts[1])
		}
		t.SupplierID = sup
		parts = append(parts[:1], parts[2:]...)
	case 4:
	default:
		return t, p, fmt.Errorf("result key %q: want bk_cloud_id:bk_supplier_id:ip:namespace:name or bk_cloud_id:ip:namespace:name", key)
	}
	cloud, err := strconv.Atoi(parts[0])
	if err != nil {
		return t, p, fmt.Errorf("result key %q: bk_cloud_id %q is not an integer", key, parts[0])
	}
	t.CloudID, t.IP = cloud, parts[1]
	p.Namespace, p.Name = parts[2], parts[3]
	return t, p, nil
}

// Item is one (host, process) an op applies to.
type Item struct {
	Target  Target    `json:"target"`
	Process ProcessID `json:"process"`
	// Spec is given inline by operate_proc and the registry requests; nil
	// means "the spec registered for Process on that host".
	Spec *Spec `json:"spec,omitempty"`
}

// Key is the item's documented v1 result key,
// `bk_cloud_id:bk_supplier_id:ip:namespace:name`. An agent id nothing maps
// to a host has no cloud or ip: its key is `agent_id:namespace:name` in
// every form.
func (it Item) Key() string {
	if !it.Target.Resolved() {
		return AgentResultKey(it.Target.AgentID, it.Process)
	}
	return ResultKey(it.Target, it.Process)
}

// KeyV2 is the key get_proc_operate_result_v2 answers under: by the agent
// id exactly as sent when the caller named the host by one, else
// `bk_cloud_id:ip:namespace:name`.
func (it Item) KeyV2() string {
	if it.Target.AgentID != "" {
		return AgentResultKey(it.Target.AgentID, it.Process)
	}
	return ShortResultKey(it.Target, it.Process)
}

// KeyProcess is the process a result key of any form names: its last two
// fields, since neither namespace nor name may hold ':'.
func KeyProcess(key string) ProcessID {
	parts := strings.Split(key, ":")
	if len(parts) < 3 {
		return ProcessID{}
	}
	return ProcessID{Namespace: parts[len(parts)-2], Name: parts[len(parts)-1]}
}

// AgentResultKey is `agent_id:namespace:name`.
func AgentResultKey(agentID string, p ProcessID) string {
	return agentID + ":" + p.Namespace + ":" + p.Name
}

// KeyV2Of gives a stored result's v2 key: the agent id form when the host
// was named by one, else the v1 key without its supplier id.
func KeyV2Of(r KeyedResult) string {
	t, p, err := ParseResultKey(r.Key)
	switch {
	case err != nil:
		return r.Key // an agent id nothing mapped: agent_id:namespace:name already
	case r.AgentID != "":
		return AgentResultKey(r.AgentID, p)
	}
	return ShortResultKey(t, p)
}
