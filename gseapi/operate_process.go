package gseapi

import (
	"bytes"
	"encoding/json"
	"strings"
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
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Labels hold any JSON scalar, kept as sent: callers send CMDB ids
	// as integers.
	Labels map[string]json.RawMessage `json:"labels"`
}

// OperateProcessRequest is seed 000.
type OperateProcessRequest struct {
	Caller
	Meta Meta `json:"meta"`
	HostList
	OpType *int `json:"op_type"`

	targets []proc.Target
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
	targets, err := metaTargets(r.Meta, r.HostList)
	if err != nil {
		return err
	}
	if r.OpType == nil {
		return fieldErr("op_type", "is required")
	}
	r.targets = targets
	return nil
}

// metaTargets checks the meta and reads the hosts of a request that names
// one process (meta) on some hosts (hosts or agent_id_list).
func metaTargets(m Meta, l HostList) ([]proc.Target, error) {
	if err := validateMeta("meta", m); err != nil {
		return nil, err
	}
	return l.targets("")
}

func validateMeta(field string, m Meta) error {
	if err := validateName(field+".namespace", m.Namespace); err != nil {
		return err
	}
	if err := validateProcessName(field+".name", m.Name); err != nil {
		return err
	}
	for k, v := range m.Labels {
		if k == "" {
			return fieldErr(field+".labels", "keys must not be empty")
		}
		switch kind := jsonValueKind(bytes.TrimSpace(v)); kind {
		case "object", "array":
			return fieldErr(field+".labels."+k, "must be a JSON scalar (string, number, boolean or null), got %s", kind)
		}
	}
	return nil
}

// validateName keeps a namespace usable inside result keys
// (':'-separated) and before the '/' of the DroverProcess search attribute
// (namespace/name). Anything else, quotes and spaces included, is allowed
// and handled literally.
func validateName(field, v string) error {
	if err := validateNamed(field, v, 128); err != nil {
		return err
	}
	switch {
	case strings.ContainsAny(v, ":/"):
		return fieldErr(field, "must not contain ':' or '/' (%q)", v)
	case hasControl(v):
		return fieldErr(field, "must not contain control characters")
	}
	return nil
}

// MaxProcessNameBytes bounds a process name: a value_key is often a path
// (setup_path/proc_name), and namespace/name is a search attribute value,
// which Temporal keeps under 2 KB.
const MaxProcessNameBytes = 1024

// validateProcessName is the rule for the name in result keys: meta.name,
// or an operate_proc value_key (else proc_name). A '/' is allowed, as in
// the documented default value_key, setup_path/proc_name. A ':' is not:
// callers split the key bk_cloud_id:bk_supplier_id:ip:namespace:name on
// it, and would read another process's key.
func validateProcessName(field, v string) error {
	if err := validateNamed(field, v, MaxProcessNameBytes); err != nil {
		return err
	}
	switch {
	case strings.Contains(v, ":"):
		return fieldErr(field, "must not contain ':' (%q): it is the process name in result keys (bk_cloud_id:bk_supplier_id:ip:namespace:name), which callers split on ':'", v)
	case hasControl(v):
		return fieldErr(field, "must not contain control characters")
	}
	return nil
}

// metaItems is one item per target, all naming meta's process; spec, when
// not nil, is copied into each item so work on one host cannot change
// another's.
func metaItems(meta Meta, targets []proc.Target, spec *proc.Spec) []proc.Item {
	pid := proc.ProcessID{Namespace: meta.Namespace, Name: meta.Name}
	items := make([]proc.Item, len(targets))
	for i, t := range targets {
		items[i] = proc.Item{Target: t, Process: pid}
		if spec != nil {
			s := *spec
			items[i].Spec = &s
		}
	}
	return items
}

// Items translates the request to the processes it acts on: meta names a
// process whose spec was registered on each host.
func (r *OperateProcessRequest) Items() (proc.OpType, []proc.Item) {
	return gseOp(*r.OpType), metaItems(r.Meta, r.targets, nil)
}
