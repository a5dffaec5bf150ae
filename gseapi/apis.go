package gseapi

import (
	"context"
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
	// the forms GSE 2.0 callers look up (see docs/http-api.md).
	APIGetProcOperateResultV2 = "get_proc_operate_result_v2"
	APIGetProcStatusV2        = "get_proc_status_v2"

	// drover's own file APIs, beside the GSE ones: push config files (and
	// reload or restart), repair drifted ones, and read a log's tail.
	APIPushConfig   = "push_config"
	APIRepairConfig = "repair_config"
	APITailLog      = "tail_proc_log"
	// APICancelTask is drover's own too: GSE has no way to cancel a task.
	APICancelTask = "cancel_task"
)

// kind is how an API answers.
type kind int

const (
	kindTask  kind = iota // starts a task and answers its id
	kindSync              // starts a task and answers its hosts' results (the registry APIs)
	kindFile              // starts a task on files kept in the content store; answers its id
	kindQuery             // answers from what the engine knows
)

// route is where the HTTP gateway serves an API.
type route int

const (
	routeGSE    route = iota // the ESB and GSE 2.0 paths, /.../<name>
	routeDrover              // drover's own path beside them, droverPath + <name>
	// routeCLI: the starter only. tail_proc_log's long tails are answered
	// by reference to the content store, which the starter reads.
	routeCLI
)

// drover's own APIs are served beside the GSE 2.0 ones, under "drover/".
const (
	droverPrefix = "drover/"
	droverPath   = "/api/v2/proc/" + droverPrefix
)

// CancelTaskPath is cancel_task's endpoint. Its body is
// get_proc_operate_result's ({task_id}).
const CancelTaskPath = droverPath + APICancelTask

// apiSpec is everything drover knows of one API.
type apiSpec struct {
	name  string
	kind  kind
	route route
	// decode validates a task's body into t (every kind but kindQuery),
	// with the namespaces it names, checked against the caller's grant.
	decode func(t *Task, body []byte) error
	// accepted is the data an accepted task answers: its id under the
	// field its callers read.
	accepted func(t *Task, taskID string) any
	// query decodes a query's body into its answer (kindQuery only).
	query func(body []byte) (query, error)
}

// query is a decoded query: the namespaces it names (none when they are
// known only from a task's results, which its answer checks) and how it is
// answered.
type query struct {
	uses   []namespaceUse
	answer func(ctx context.Context, e Engine, g *Grant) (Response, Outcome)
}

// apiTable is every API drover answers, in the order it lists them: the
// GSE APIs that start a task, the GSE queries, then drover's own.
var apiTable = []apiSpec{
	taskAPI(APIOperateProcess, decodeOperateProcess, taskIDData),
	taskAPI(APIOperateProc, decodeOperateProcForms, gseTaskIDData),
	taskAPI(APIOperateProcV2, decodeOperateProcForms, gseTaskIDData),
	taskAPI(APIOperateProcMulti, decodeOperateProcMulti, taskIDData),
	taskAPI(APIManageProc, decodeManageProc, gseTaskIDData),
	syncAPI(APIRegisterProcInfo, decodeProcInfo(proc.OpSpecRegister)),
	syncAPI(APIUpdateProcInfo, decodeProcInfo(proc.OpSpecUpdate)),
	syncAPI(APIUnregisterProcInfo, decodeProcInfo(proc.OpSpecUnregister)),
	queryAPI(APIGetProcOperateResult, routeGSE, resultQuery(false)),
	queryAPI(APIGetProcStatus, routeGSE, statusQuery(false)),
	queryAPI(APISyncProcStatus, routeGSE, syncQuery),
	queryAPI(APIGetProcOperateResultV2, routeGSE, resultQuery(true)),
	queryAPI(APIGetProcStatusV2, routeGSE, statusQuery(true)),
	fileAPI(APIPushConfig, routeGSE, decodeFiles(proc.OpPushConfig, decodePush)),
	fileAPI(APIRepairConfig, routeGSE, decodeFiles(proc.OpRepairConfig, nil)),
	fileAPI(APITailLog, routeCLI, decodeFiles(proc.OpLogs, decodeTail)),
	queryAPI(APICancelTask, routeDrover, cancelQuery),
}

func taskAPI(name string, decode func(*Task, []byte) error, accepted func(*Task, string) any) apiSpec {
	return apiSpec{name: name, kind: kindTask, decode: decode, accepted: accepted}
}

// syncAPI is a registry API. Its answer is SyncResponse; accepted, for a
// caller that starts one without waiting, lets the work still be polled.
func syncAPI(name string, decode func(*Task, []byte) error) apiSpec {
	return apiSpec{name: name, kind: kindSync, decode: decode, accepted: taskIDData}
}

func fileAPI(name string, r route, decode func(*Task, []byte) error) apiSpec {
	return apiSpec{name: name, kind: kindFile, route: r, decode: decode, accepted: taskIDData}
}

func queryAPI(name string, r route, q func([]byte) (query, error)) apiSpec {
	return apiSpec{name: name, kind: kindQuery, route: r, query: q}
}

// taskIDData is data {"task_id"}: operate_process, operate_proc_multi,
// GSE 2.0's meta form and drover's own APIs.
func taskIDData(_ *Task, id string) any { return TaskData{TaskID: id} }

// gseTaskIDData is data {"bk_gse_taskid"}, the seeds' operate_proc,
// operate_proc_v2 and manage_proc; their meta form is read back by
// data.task_id.
func gseTaskIDData(t *Task, id string) any {
	if t.MetaForm {
		return TaskData{TaskID: id}
	}
	return GseTaskData{BkGseTaskID: id}
}

// names lists, in table order, the APIs keep accepts.
func names(keep func(apiSpec) bool) []string {
	var out []string
	for _, s := range apiTable {
		if keep(s) {
			out = append(out, s.name)
		}
	}
	return out
}

// APIs lists the GSE APIs drover answers, in a stable order: first those
// that start a task, then the queries.
var APIs = names(func(s apiSpec) bool { return s.route == routeGSE && s.kind != kindFile })

// FileAPIs are the file APIs served over HTTP.
var FileAPIs = names(func(s apiSpec) bool { return s.route != routeCLI && s.kind == kindFile })

// lookup finds an API by name; an unknown one is an error on the field
// "api" that lists every name.
func lookup(api string) (apiSpec, error) {
	for _, s := range apiTable {
		if s.name == api {
			return s, nil
		}
	}
	all := names(func(apiSpec) bool { return true })
	return apiSpec{}, fieldErr("api", "unknown API %q; want one of %s", api, strings.Join(all, ", "))
}

// Synchronous reports whether an API answers with per-key results in the
// request itself (the registry APIs) rather than with a task id to poll.
func Synchronous(api string) bool {
	s, err := lookup(api)
	return err == nil && s.kind == kindSync
}
