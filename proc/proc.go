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

// Key is the item's documented result key.
func (it Item) Key() string { return ResultKey(it.Target, it.Process) }
