package gseapi

import (
	"bytes"

	"github.com/drover-sh/drover/proc"
)

// MultiEntry is one operate_process-like entry of operate_proc_multi, with
// an optional register_proc_info spec to act on instead of the registered one.
type MultiEntry struct {
	Meta   Meta      `json:"meta"`
	Hosts  []HostRef `json:"hosts"`
	OpType *int      `json:"op_type"`
	Spec   *SpecJSON `json:"spec"`
}

// OperateProcMultiRequest is operate_proc_multi: several processes under one
// task. The body is {"proc_operate_req": [...]} (GSE 2.0's field) or, as some
// callers send it, the bare array.
type OperateProcMultiRequest struct {
	Caller
	Entries []MultiEntry `json:"proc_operate_req"`

	specs []*proc.Spec
	root  string // "proc_operate_req", or "" for a bare array
}

// DecodeOperateProcMulti decodes and validates operate_proc_multi.
//
// Every entry must carry the same op_type: one task is one op (a workflow
// runs one op over its items and answers one result per key), so a request
// mixing ops is refused at the first entry that differs rather than split
// behind the caller's back. Field paths start with proc_operate_req[i], or
// with [i] for a bare array.
func DecodeOperateProcMulti(body []byte) (*OperateProcMultiRequest, error) {
	var r OperateProcMultiRequest
	root := "proc_operate_req"
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '[' {
		root = ""
		if err := decode(body, &r.Entries); err != nil {
			return nil, err
		}
	} else if err := decode(body, &r); err != nil {
		return nil, err
	}
	if err := r.validate(root); err != nil {
		return nil, err
	}
	r.root = root
	return &r, nil
}

type multiKey struct {
	host proc.HostID
	id   proc.ProcessID
}

func (r *OperateProcMultiRequest) validate(root string) error {
	if len(r.Entries) == 0 {
		f := root
		if f == "" {
			f = "(body)"
		}
		return fieldErr(f, "is required and must list at least one entry")
	}
	r.specs = make([]*proc.Spec, len(r.Entries))
	seen := map[multiKey]string{}
	total := 0
	for i := range r.Entries {
		e := &r.Entries[i]
		ef := indexed(root, i)
		if err := validateMeta(prefixPath(ef, "meta"), e.Meta); err != nil {
			return err
		}
		if err := validateHosts(prefixPath(ef, "hosts"), e.Hosts); err != nil {
			return err
		}
		if e.OpType == nil {
			return fieldErr(prefixPath(ef, "op_type"), "is required")
		}
		if first := r.Entries[0].OpType; *e.OpType != *first {
			return fieldErr(prefixPath(ef, "op_type"), "is %d but %s is %d; all entries of one request must share one op_type", *e.OpType, prefixPath(indexed(root, 0), "op_type"), *first)
		}
		total += len(e.Hosts)
		if total > MaxHosts {
			return fieldErr(prefixPath(ef, "hosts"), "brings the request to %d (host, process) pairs; at most %d", total, MaxHosts)
		}
		id := proc.ProcessID{Namespace: e.Meta.Namespace, Name: e.Meta.Name}
		for j, h := range e.Hosts {
			hf := indexed(prefixPath(ef, "hosts"), j)
			k := multiKey{proc.HostID{CloudID: *h.CloudID, IP: h.IP}, id}
			if prev, dup := seen[k]; dup {
				return fieldErr(hf, "duplicates %s: bk_cloud_id %d, ip %s, process %s/%s", prev, *h.CloudID, h.IP, id.Namespace, id.Name)
			}
			seen[k] = hf
		}
		if e.Spec != nil {
			s, _, err := e.Spec.toSpec(prefixPath(ef, "spec"), e.Meta)
			if err != nil {
				return err
			}
			r.specs[i] = &s
		}
	}
	return nil
}

// Items translates the request: one item per (entry, host), with the entry's
// inline spec when it has one.
func (r *OperateProcMultiRequest) Items() (proc.OpType, []proc.Item) {
	n := 0
	for _, e := range r.Entries {
		n += len(e.Hosts)
	}
	items := make([]proc.Item, 0, n)
	for i, e := range r.Entries {
		id := proc.ProcessID{Namespace: e.Meta.Namespace, Name: e.Meta.Name}
		for _, h := range e.Hosts {
			it := proc.Item{Target: h.Target(), Process: id}
			if r.specs[i] != nil {
				s := *r.specs[i]
				it.Spec = &s
			}
			items = append(items, it)
		}
	}
	return gseOp(*r.Entries[0].OpType), items
}
