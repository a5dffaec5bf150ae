package gseapi

import (
	"bytes"

	"github.com/drover-sh/drover/proc"
)

// MultiEntry is one operate_process-like entry of operate_proc_multi, with
// an optional register_proc_info spec to act on instead of the registered
// one. It is also the whole body of operate_proc's meta form.
type MultiEntry struct {
	Meta Meta `json:"meta"`
	HostList
	OpType *int      `json:"op_type"`
	Spec   *SpecJSON `json:"spec"`

	targets []proc.Target
	spec    *proc.Spec
}

// decode validates the entry under field f (its path prefix).
func (e *MultiEntry) decode(f string) error {
	if err := validateMeta(prefixPath(f, "meta"), e.Meta); err != nil {
		return err
	}
	targets, err := e.HostList.targets(f)
	if err != nil {
		return err
	}
	if e.OpType == nil {
		return fieldErr(prefixPath(f, "op_type"), "is required")
	}
	e.targets = targets
	if e.Spec == nil || lookupOnly(*e.OpType, e.Spec) {
		return nil
	}
	s, _, err := e.Spec.toSpec(prefixPath(f, "spec"), e.Meta)
	if err != nil {
		return err
	}
	e.spec = &s
	return nil
}

// lookupOnly reports a status query whose spec only names the process:
// callers send identity.proc_name with every other field "" or 0 (even
// auto_type 0). It probes the spec registered for meta on each host, and a
// host where none is registered answers 9106; such a spec cannot be probed
// itself, as it has no pid file.
func lookupOnly(op int, s *SpecJSON) bool {
	return op == int(proc.OpStatus) && (s.Identity == nil || s.Identity.PidPath == "")
}

// items is one item per host, with the entry's inline spec when it has one.
func (e *MultiEntry) items() []proc.Item { return metaItems(e.Meta, e.targets, e.spec) }

// OperateProcMultiRequest is operate_proc_multi: several processes under one
// task. The body is {"proc_operate_req": [...]} (GSE 2.0's field) or, as some
// callers send it, the bare array.
type OperateProcMultiRequest struct {
	Caller
	Entries []MultiEntry `json:"proc_operate_req"`

	root string // "proc_operate_req", or "" for a bare array
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
	host string // the host as named: cloud:ip, or the agent id
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
	seen := map[multiKey]string{}
	total := 0
	for i := range r.Entries {
		e := &r.Entries[i]
		ef := indexed(root, i)
		if err := e.decode(ef); err != nil {
			return err
		}
		if first := r.Entries[0].OpType; *e.OpType != *first {
			return fieldErr(prefixPath(ef, "op_type"), "is %d but %s is %d; all entries of one request must share one op_type", *e.OpType, prefixPath(indexed(root, 0), "op_type"), *first)
		}
		total += len(e.targets)
		if total > MaxHosts {
			return fieldErr(prefixPath(ef, "hosts"), "brings the request to %d (host, process) pairs; at most %d", total, MaxHosts)
		}
		id := proc.ProcessID{Namespace: e.Meta.Namespace, Name: e.Meta.Name}
		for j, t := range e.targets {
			hf := indexed(prefixPath(ef, "hosts"), j)
			if e.AgentIDs != nil {
				hf = indexed(prefixPath(ef, "agent_id_list"), j)
			}
			k := multiKey{t.AgentIDOrHost(), id}
			if prev, dup := seen[k]; dup {
				return fieldErr(hf, "duplicates %s: host %s, process %s/%s", prev, k.host, id.Namespace, id.Name)
			}
			seen[k] = hf
		}
	}
	return nil
}

// Items translates the request: one item per (entry, host), with the entry's
// inline spec when it has one.
func (r *OperateProcMultiRequest) Items() (proc.OpType, []proc.Item) {
	var items []proc.Item
	for i := range r.Entries {
		items = append(items, r.Entries[i].items()...)
	}
	return gseOp(*r.Entries[0].OpType), items
}
