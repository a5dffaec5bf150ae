package gseapi

import (
	"fmt"

	"github.com/drover-sh/drover/proc"
)

// Task is any accepted request that starts work, ready for a workflow.
type Task struct {
	API    string      // canonical API name
	Op     proc.OpType // may be invalid: each item is then answered 832
	Items  []proc.Item // one per (host, process)
	Manage bool        // seed 003 register: also mark the process managed
	// MetaForm: operate_proc(_v2) came in GSE 2.0's meta form, whose
	// callers read data.task_id rather than data.bk_gse_taskid.
	MetaForm bool
	// Caller is for authentication at the edge only. It is never
	// forwarded, and json:"-" keeps it out of any JSON-encoded workflow
	// input or history should a Task be passed whole.
	Caller Caller `json:"-"`
	// Files is a file op's files, by reference, and options.
	Files *proc.FileOp
	// uses are the namespaces the request names and where, checked
	// against the caller's grant before anything starts.
	uses []namespaceUse
	// contents are a push's inline contents until StoreFiles stores them.
	contents [][]byte
}

// DecodeTask decodes and validates the body of an API that starts a task.
// Every error is a *FieldError; an unknown or query API is one on the field
// "api". A nil error means at least one item.
func DecodeTask(api string, body []byte) (*Task, error) {
	s, err := lookup(api)
	if err != nil {
		return nil, err
	}
	if s.decode == nil {
		return nil, fieldErr("api", "%q is a query and starts no task", api)
	}
	t := &Task{API: api}
	if err := s.decode(t, body); err != nil {
		return nil, err
	}
	if len(t.Items) == 0 {
		// Unreachable: every decoder requires a host; kept so the
		// promise above cannot silently break.
		return nil, fieldErr("(body)", "names no host")
	}
	return t, nil
}

// taskRequest is a decoded request whose task runs one op over its items.
type taskRequest interface {
	Items() (proc.OpType, []proc.Item)
	caller() Caller
}

// caller is a request's caller: every request embeds its Caller.
func (c Caller) caller() Caller { return c }

// take gives t what a decoded request carries: its caller, op and items,
// and uses, the namespaces it names.
func (t *Task) take(r taskRequest, uses []namespaceUse) {
	t.Caller = r.caller()
	t.Op, t.Items = r.Items()
	t.uses = uses
}

func decodeOperateProcess(t *Task, body []byte) error {
	r, err := DecodeOperateProcess(body)
	if err != nil {
		return err
	}
	t.take(r, metaNamespace(r.Meta.Namespace))
	return nil
}

// decodeOperateProcForms reads operate_proc(_v2) in either form: the
// seeds' or GSE 2.0's meta form, told apart by the body's shape.
func decodeOperateProcForms(t *Task, body []byte) error {
	meta, err := isMetaForm(body)
	if err != nil {
		return err
	}
	if meta {
		r, err := decodeMetaForm(body)
		if err != nil {
			return err
		}
		t.Caller, t.MetaForm = r.Caller, true
		t.Op, t.Items = gseOp(*r.OpType), r.items()
		t.uses = metaNamespace(r.Meta.Namespace)
		return nil
	}
	r, err := DecodeOperateProc(body)
	if err != nil {
		return err
	}
	t.take(r, []namespaceUse{{Field: "bk_biz_id", Namespace: r.Namespace()}})
	return nil
}

func decodeOperateProcMulti(t *Task, body []byte) error {
	r, err := DecodeOperateProcMulti(body)
	if err != nil {
		return err
	}
	var uses []namespaceUse
	for i, e := range r.Entries {
		uses = append(uses, namespaceUse{Field: prefixPath(indexed(r.root, i), "meta.namespace"), Namespace: e.Meta.Namespace})
	}
	t.take(r, uses)
	return nil
}

func decodeManageProc(t *Task, body []byte) error {
	r, err := DecodeManageProc(body)
	if err != nil {
		return err
	}
	t.Caller = r.Caller
	t.Op, t.Manage, t.Items = r.Items()
	t.uses = []namespaceUse{{Field: "bk_scope_id", Namespace: r.Namespace()}}
	return nil
}

// decodeProcInfo decodes a registry API, whose op is its own.
func decodeProcInfo(op proc.OpType) func(*Task, []byte) error {
	return func(t *Task, body []byte) error {
		r, err := DecodeProcInfo(body, op)
		if err != nil {
			return err
		}
		t.take(r, metaNamespace(r.Meta.Namespace))
		return nil
	}
}

// GseTaskData is the answer of operate_proc, operate_proc_v2 and manage_proc.
type GseTaskData struct {
	BkGseTaskID string `json:"bk_gse_taskid"`
}

// Accepted is the answer to an accepted asynchronous request: its task id
// under the field that API's callers read (see apiTable). The synchronous
// registry APIs answer with SyncResponse; should one reach here, it gets
// {"task_id"} so the work can still be polled.
func Accepted(t *Task, taskID string) Response {
	s, err := lookup(t.API)
	if err != nil || s.accepted == nil {
		return Failure(0, fieldErr("api", "unknown task API %q", t.API))
	}
	return OK(s.accepted(t, taskID))
}

// SyncResponse is a registry API's answer: data keyed by each item's
// documented result key. An item missing from results (its host has not
// answered before the request's deadline) is reported 115, which seed 004
// documents as "in progress, retry".
func SyncResponse(t *Task, results []proc.KeyedResult) Response {
	got := proc.ByKey(results)
	all := make([]proc.KeyedResult, len(t.Items))
	for i, it := range t.Items {
		all[i] = proc.KeyedResult{Key: it.Key(), HostResult: proc.Pending()}
		if r, ok := got[all[i].Key]; ok {
			all[i].HostResult = r
		}
	}
	return OK(ResultData(all, func(r proc.KeyedResult) string { return r.Key }))
}

// String names a task without any caller field, for logs.
func (t Task) String() string {
	return fmt.Sprintf("%s op=%v items=%d manage=%v", t.API, t.Op, len(t.Items), t.Manage)
}
