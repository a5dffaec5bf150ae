package gseapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/drover-sh/drover/proc"
)

// Caller holds the common ESB fields. They identify the caller and are
// credentials: they are checked at the edge and never travel further.
type Caller struct {
	AppCode   string `json:"bk_app_code"`
	AppSecret string `json:"bk_app_secret"`
	Token     string `json:"bk_token"`
	Username  string `json:"bk_username"`
}

// Meta names a process (seed 000 meta).
type Meta struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels"`
}

// HostRef is one entry of `hosts`.
type HostRef struct {
	IP         string `json:"ip"`
	CloudID    *int   `json:"bk_cloud_id"`
	SupplierID *int   `json:"bk_supplier_id"`
}

// OperateProcessRequest is seed 000.
type OperateProcessRequest struct {
	Caller
	Meta   Meta      `json:"meta"`
	Hosts  []HostRef `json:"hosts"`
	OpType *int      `json:"op_type"`
}

// MaxBodyBytes bounds a request body; bigger bodies are refused whole.
const MaxBodyBytes = 8 << 20

// MaxHosts bounds the hosts of one request.
const MaxHosts = 100000

// DecodeOperateProcess decodes and validates seed 000.
func DecodeOperateProcess(body []byte) (*OperateProcessRequest, error) {
	var r OperateProcessRequest
	if err := decode(body, &r); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

func decode(body []byte, v any) error {
	if len(body) > MaxBodyBytes {
		return fieldErr("(body)", "is %d bytes; the limit is %d", len(body), MaxBodyBytes)
	}
	if !utf8.Valid(body) {
		return fieldErr("(body)", "is not valid UTF-8")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return fieldErr("(body)", "is empty; want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return decodeError(body, err)
	}
	if dec.More() {
		return fieldErr("(body)", "has data after the JSON object")
	}
	return nil
}

// Validate checks every field against its documented rule.
func (r *OperateProcessRequest) Validate() error {
	if err := validateMeta("meta", r.Meta); err != nil {
		return err
	}
	if err := validateHosts("hosts", r.Hosts); err != nil {
		return err
	}
	if r.OpType == nil {
		return fieldErr("op_type", "is required")
	}
	return nil
}

func validateMeta(field string, m Meta) error {
	if err := validateName(field+".namespace", m.Namespace); err != nil {
		return err
	}
	if err := validateName(field+".name", m.Name); err != nil {
		return err
	}
	for k := range m.Labels {
		if k == "" {
			return fieldErr(field+".labels", "keys must not be empty")
		}
	}
	return nil
}

// validateName keeps namespace and name usable inside result keys
// (':'-separated) and as path components. Anything else, quotes and spaces
// included, is allowed and handled literally.
func validateName(field, v string) error {
	switch {
	case v == "":
		return fieldErr(field, "is required and must not be empty")
	case len(v) > 128:
		return fieldErr(field, "is %d bytes; at most 128", len(v))
	case v == "." || v == "..":
		return fieldErr(field, "must not be %q", v)
	case strings.ContainsAny(v, ":/"):
		return fieldErr(field, "must not contain ':' or '/' (%q)", v)
	}
	for _, c := range v {
		if unicode.IsControl(c) {
			return fieldErr(field, "must not contain control characters")
		}
	}
	return nil
}

func validateHosts(field string, hosts []HostRef) error {
	if len(hosts) == 0 {
		return fieldErr(field, "is required and must list at least one host")
	}
	if len(hosts) > MaxHosts {
		return fieldErr(field, "lists %d hosts; at most %d per request", len(hosts), MaxHosts)
	}
	seen := make(map[proc.HostID]int, len(hosts))
	for i, h := range hosts {
		f := fmt.Sprintf("%s[%d]", field, i)
		if h.IP == "" {
			return fieldErr(f+".ip", "is required")
		}
		if net.ParseIP(h.IP) == nil {
			return fieldErr(f+".ip", "%q is not an IPv4 or IPv6 address", h.IP)
		}
		if h.CloudID == nil {
			return fieldErr(f+".bk_cloud_id", "is required")
		}
		if *h.CloudID < 0 {
			return fieldErr(f+".bk_cloud_id", "must be >= 0, got %d", *h.CloudID)
		}
		if h.SupplierID == nil {
			return fieldErr(f+".bk_supplier_id", "is required")
		}
		if *h.SupplierID < 0 {
			return fieldErr(f+".bk_supplier_id", "must be >= 0, got %d", *h.SupplierID)
		}
		id := proc.HostID{CloudID: *h.CloudID, IP: h.IP}
		if j, dup := seen[id]; dup {
			return fieldErr(f, "duplicates %s[%d] (bk_cloud_id %d, ip %s)", field, j, id.CloudID, id.IP)
		}
		seen[id] = i
	}
	return nil
}

// Target converts a validated host reference.
func (h HostRef) Target() proc.Target {
	return proc.Target{CloudID: *h.CloudID, SupplierID: *h.SupplierID, IP: h.IP}
}

// Items translates the request to the processes it acts on: meta names a
// process whose spec was registered on each host.
func (r *OperateProcessRequest) Items() (proc.OpType, []proc.Item) {
	pid := proc.ProcessID{Namespace: r.Meta.Namespace, Name: r.Meta.Name}
	items := make([]proc.Item, len(r.Hosts))
	for i, h := range r.Hosts {
		items[i] = proc.Item{Target: h.Target(), Process: pid}
	}
	return gseOp(*r.OpType), items
}
