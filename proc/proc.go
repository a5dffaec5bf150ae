// Package proc is drover's domain: what a managed process is, which host it
// lives on, what can be done to it and how each outcome is reported. It does
// no I/O, so every rule here is tested directly.
package proc

import (
	"fmt"
	"strconv"
	"strings"
)

// Target identifies one host the way GSE callers do: (bk_cloud_id, ip), with
// the supplier id carried along because result keys include it.
type Target struct {
	CloudID    int    `json:"bk_cloud_id"`
	SupplierID int    `json:"bk_supplier_id"`
	IP         string `json:"ip"`
}

// HostID is the inventory identity of a host; the supplier id is not part of it.
type HostID struct {
	CloudID int
	IP      string
}

func (t Target) HostID() HostID { return HostID{CloudID: t.CloudID, IP: t.IP} }

func (h HostID) String() string { return strconv.Itoa(h.CloudID) + ":" + h.IP }

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
