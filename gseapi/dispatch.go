package gseapi

import (
	"fmt"
	"strings"

	"github.com/drover-sh/drover/proc"
)

// API names drover answers.
const (
	APIOperateProcess       = "operate_process"
	APIOperateProc          = "operate_proc"
	APIOperateProcV2        = "operate_proc_v2"
	APIOperateProcMulti     = "operate_proc_multi"
	APIManageProc           = "manage_proc"
	APIRegisterProcInfo     = "register_proc_info"
	APIUpdateProcInfo       = "update_proc_info"
	APIUnregisterProcInfo   = "unregister_proc_info"
	APIGetProcOperateResult = "get_proc_operate_result"
	APIGetProcStatus        = "get_proc_status"
	APISyncProcStatus       = "sync_proc_status"
	// GSE 2.0's result and status APIs: the same questions, answered in
	// the forms GSE 2.0 callers look up (see the dialect in the README).
	APIGetProcOperateResultV2 = "get_proc_operate_result_v2"
	APIGetProcStatusV2        = "get_proc_status_v2"
)

// APIs lists every API name drover answers, in a stable order: first the
// eight that start a task (DecodeTask), then the five queries.
var APIs = []string{
	APIOperateProcess, APIOperateProc, APIOperateProcV2, APIOperateProcMulti, APIManageProc,
	APIRegisterProcInfo, APIUpdateProcInfo, APIUnregisterProcInfo,
	APIGetProcOperateResult, APIGetProcStatus, APISyncProcStatus,
	APIGetProcOperateResultV2, APIGetProcStatusV2,
}

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

// DecodeTask decodes and validates the body of one of the eight
// task-starting APIs. Every error is a *FieldError; an unknown or query API
// is one on the field "api". A nil error means at least one item.
func DecodeTask(api string, body []byte) (*Task, error) {
	t := &Task{API: api}
	switch api {
	case APIOperateProcess:
		r, err := DecodeOperateProcess(body)
		if err != nil {
			return nil, err
		}
		t.Caller = r.Caller
		t.Op, t.Items = r.Items()
		t.uses = metaNamespace(r.Meta.Namespace)
	case APIOperateProc, APIOperateProcV2:
		meta, err := isMetaForm(body)
		if err != nil {
			return nil, err
		}
		if meta {
			r, err := decodeMetaForm(body)
			if err != nil {
				return nil, err
			}
			t.Caller, t.MetaForm = r.Caller, true
			t.Op, t.Items = gseOp(*r.OpType), r.items()
			t.uses = metaNamespace(r.Meta.Namespace)
			break
		}
		r, err := DecodeOperateProc(body)
		if err != nil {
			return nil, err
		}
		t.Caller = r.Caller
		t.Op, t.Items = r.Items()
		t.uses = []namespaceUse{{Field: "bk_biz_id", Namespace: r.Namespace()}}
	case APIOperateProcMulti:
		r, err := DecodeOperateProcMulti(body)
		if err != nil {
			return nil, err
		}
		t.Caller = r.Caller
		t.Op, t.Items = r.Items()
		for i, e := range r.Entries {
			t.uses = append(t.uses, namespaceUse{Field: prefixPath(indexed(r.root, i), "meta.namespace"), Namespace: e.Meta.Namespace})
		}
	case APIManageProc:
		r, err := DecodeManageProc(body)
		if err != nil {
			return nil, err
		}
		t.Caller = r.Caller
		t.Op, t.Manage, t.Items = r.Items()
		t.uses = []namespaceUse{{Field: "bk_scope_id", Namespace: r.Namespace()}}
	case APIRegisterProcInfo, APIUpdateProcInfo, APIUnregisterProcInfo:
		op := map[string]proc.OpType{
			APIRegisterProcInfo: proc.OpSpecRegister, APIUpdateProcInfo: proc.OpSpecUpdate,
			APIUnregisterProcInfo: proc.OpSpecUnregister,
		}[api]
		r, err := DecodeProcInfo(body, op)
		if err != nil {
			return nil, err
		}
		t.Caller = r.Caller
		t.Op, t.Items = r.Items()
		t.uses = metaNamespace(r.Meta.Namespace)
	case APIPushConfig, APIRepairConfig, APITailLog:
		if err := decodeFilesTask(t, body); err != nil {
			return nil, err
		}
	case APIGetProcOperateResult, APIGetProcStatus, APISyncProcStatus, APIGetProcOperateResultV2, APIGetProcStatusV2:
		return nil, fieldErr("api", "%q is a query and starts no task", api)
	default:
		return nil, fieldErr("api", "unknown API %q; want one of %s", api, strings.Join(APIs[:8], ", "))
	}
	if len(t.Items) == 0 {
		// Unreachable: every decoder requires a host; kept so the
		// promise above cannot silently break.
		return nil, fieldErr("(body)", "names no host")
	}
	return t, nil
}

// Synchronous reports whether an API answers with per-key results in the
// request itself (the registry APIs) rather than with a task id to poll.
func Synchronous(api string) bool {
	switch api {
	case APIRegisterProcInfo, APIUpdateProcInfo, APIUnregisterProcInfo:
		return true
	}
	return false
}

// GseTaskData is the answer of operate_proc, operate_proc_v2 and manage_proc.
type GseTaskData struct {
	BkGseTaskID string `json:"bk_gse_taskid"`
}

// Accepted is the answer to an accepted asynchronous request:
// operate_process, operate_proc_multi, operate_proc's meta form and
// drover's file APIs answer data {"task_id"}; the seeds' operate_proc, operate_proc_v2 and
// manage_proc data {"bk_gse_taskid"}. The synchronous registry APIs answer
// with SyncResponse; should one reach here, it gets {"task_id"} so the work
// can still be polled.
func Accepted(t *Task, taskID string) Response {
	switch t.API {
	case APIOperateProc, APIOperateProcV2, APIManageProc:
		if !t.MetaForm {
			return OK(GseTaskData{BkGseTaskID: taskID})
		}
		return OK(TaskData{TaskID: taskID})
	case APIOperateProcess, APIOperateProcMulti,
		APIRegisterProcInfo, APIUpdateProcInfo, APIUnregisterProcInfo,
		APIPushConfig, APIRepairConfig, APITailLog:
		return OK(TaskData{TaskID: taskID})
	}
	return Failure(0, fieldErr("api", "unknown task API %q", t.API))
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
