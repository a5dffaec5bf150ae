package gseapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
)

func mustTask(t *testing.T, api, body string) *Task {
	t.Helper()
	task, err := DecodeTask(api, []byte(body))
	if err != nil {
		t.Fatalf("%s: %v\n%s", api, err, body)
	}
	return task
}

func TestOperateProcCarriesEveryField(t *testing.T) {
	body := `{"bk_biz_id":"12","op_type":7,"process_infos":[{
		"setup_path":"C:\\gse\\bin","proc_name":"svc.exe","pid_path":"C:\\gse\\run\\","account":"CORP\\svc",
		"cmd_shell_ext":"PS1","cpu_lmt":12.5,"mem_lmt":7,"cfg_path":"C:/gse/etc/svc.ini","log_path":"\\\\nas\\logs",
		"contact":"ops","start_cmd":"a","stop_cmd":"b","restart_cmd":"c","reload_cmd":"d","kill_cmd":"e",
		"func_id":42,"instance_id":"7","value_key":"svc-1","type":0,"cycle_time":60,"instance_num":3,
		"start_check_begin_time":2,"start_check_end_time":9,"op_timeout":120,
		"ip_list":[{"bk_cloud_id":3,"ip":"10.0.0.9"},{"bk_cloud_id":3,"ip":"fe80::1","bk_supplier_id":4}]}]}`
	task := mustTask(t, APIOperateProc, body)
	if task.Op != proc.OpRestart || len(task.Items) != 2 {
		t.Fatalf("task %v", task)
	}
	want := proc.Spec{
		ProcName: "svc.exe", SetupPath: `C:\gse\bin`, PidPath: `C:\gse\run\svc.exe.pid`, ConfigPath: "C:/gse/etc/svc.ini",
		LogPath: `\\nas\logs`, Account: `CORP\svc`, Contact: "ops", ShellExt: proc.ShellPS1,
		StartCmd: "a", StopCmd: "b", RestartCmd: "c", ReloadCmd: "d", KillCmd: "e",
		FuncID: "42", InstanceID: "7", ValueKey: "svc-1", InstanceNum: 3, CPULimit: 12.5, MemLimit: 7,
		AutoType: proc.AutoPeriodic, CycleTime: time.Minute, StartCheck: 2 * time.Second, StartCheckEnd: 9 * time.Second,
		OpTimeout: 2 * time.Minute,
	}
	for _, it := range task.Items {
		if !specEqual(*it.Spec, want) {
			t.Errorf("spec\n got %+v\nwant %+v", *it.Spec, want)
		}
		if it.Process != (proc.ProcessID{Namespace: "12", Name: "svc-1"}) {
			t.Errorf("process %+v", it.Process)
		}
	}
	if task.Items[0].Spec == task.Items[1].Spec {
		t.Error("items must not share a Spec")
	}
	if got := task.Items[1].Target; got != (proc.Target{CloudID: 3, SupplierID: 4, IP: "fe80::1"}) {
		t.Errorf("target %+v", got)
	}
}

func TestOmittedTypeIsResident(t *testing.T) {
	for _, api := range []string{APIOperateProc, APIOperateProcV2} {
		if s := mustTask(t, api, opBase).Items[0].Spec; s.AutoType != proc.AutoResident || s.CycleTime != 0 {
			t.Errorf("%s: %+v", api, s)
		}
	}
	if s := mustTask(t, APIManageProc, manageBase).Items[0].Spec; s.AutoType != proc.AutoResident {
		t.Errorf("manage_proc: %+v", s)
	}
}

func TestSameProcNameNeedsValueKey(t *testing.T) {
	pi := mustJSON(t, opBase, "process_infos.0")
	two := edit(t, opBase, "process_infos", []any{pi, pi})
	if _, err := DecodeTask(APIOperateProc, []byte(two)); err == nil {
		t.Fatal("same proc_name on the same hosts accepted")
	}
	two = edit(t, two, "process_infos.1.value_key", "second")
	task := mustTask(t, APIOperateProc, two)
	if len(task.Items) != 4 || task.Items[3].Key() != "0:0:10.0.0.2:1:second" {
		t.Fatalf("items %+v", task.Items)
	}
}

func TestUnknownOpTypesAreAccepted(t *testing.T) {
	for _, c := range []struct {
		api, body string
	}{
		{APIOperateProc, edit(t, opBase, "op_type", 5)},
		{APIOperateProcV2, edit(t, opBase, "op_type", -3)},
		// drover's registry op numbers are not reachable through op_type.
		{APIOperateProc, edit(t, opBase, "op_type", int(proc.OpSpecRegister))},
		{APIOperateProcess, `{"meta":{"namespace":"a","name":"b"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0,"bk_supplier_id":0}],"op_type":101}`},
		{APIOperateProcMulti, edit(t, edit(t, multiBase, "proc_operate_req.0.op_type", 102), "proc_operate_req.1.op_type", 102)},
		{APIManageProc, edit(t, manageBase, "op_type", 3)},
		// Nor is the host check's.
		{APIOperateProcess, `{"meta":{"namespace":"a","name":"b"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0,"bk_supplier_id":0}],"op_type":900}`},
		{APIOperateProcV2, edit(t, opBase, "op_type", int(proc.OpCheck))},
		{APIManageProc, edit(t, manageBase, "op_type", -1000)},
		{APIManageProc, edit(t, manageBase, "op_type", -1001)},
	} {
		task := mustTask(t, c.api, c.body)
		if task.Op.Valid() || task.Op.IsInternal() || task.Manage {
			t.Errorf("%s %s: op %v must be invalid", c.api, c.body, task.Op)
		}
	}
	for _, op := range []int{-1 << 40, -1001, -1000, -999, -1, 0, 3, 4, 100, 900, 1 << 29, 1 << 40} {
		if o, m := ManageOp(op); o.Valid() || o.IsInternal() || m {
			t.Errorf("ManageOp(%d) = %v, %v", op, o, m)
		}
	}
	if task := mustTask(t, APIManageProc, edit(t, manageBase, "op_type", 2)); task.Op != proc.OpSpecUnregister || task.Manage {
		t.Errorf("manage unregister: %v", task)
	}
}

func TestManageProc(t *testing.T) {
	task := mustTask(t, APIManageProc, edit(t, manageBase, "bk_scope_id", 7))
	it := task.Items[0]
	if !task.Manage || task.Op != proc.OpSpecRegister || it.Key() != "0:0:10.0.0.1:7:nginx" {
		t.Fatalf("task %v key %s", task, it.Key())
	}
	// setup_path and pid_path are optional for seed 003; proc_owner is the contact.
	if it.Spec.PidPath != "" || it.Spec.SetupPath != "" || it.Spec.Contact != "ops" {
		t.Fatalf("spec %+v", it.Spec)
	}
	task = mustTask(t, APIManageProc, edit(t, edit(t, manageBase, "bk_scope_type", "biz_set"), "process_infos.0.contact", "ops"))
	if task.Items[0].Process.Namespace != "3" {
		t.Fatalf("process %+v", task.Items[0].Process)
	}
}

func TestRegistryCronSpellings(t *testing.T) {
	mp := "spec.monitor_policy."
	periodic := edit(t, regBase, mp+"auto_type", 0)
	for _, c := range []struct{ field, rule string }{
		{"crontab_rule", "*/5 * * * *"},
		{"crotab_rule", "0 3 * * 1-5"},
		{"crotab_rule", "@every 30s"},
		{"crontab_rule", "@daily"},
	} {
		task := mustTask(t, APIRegisterProcInfo, edit(t, periodic, mp+c.field, c.rule))
		if s := task.Items[0].Spec; s.CrontabRule != c.rule || s.AutoType != proc.AutoPeriodic {
			t.Errorf("%s %q: spec %+v", c.field, c.rule, s)
		}
	}
	same := edit(t, edit(t, periodic, mp+"crontab_rule", "@hourly"), mp+"crotab_rule", "@hourly")
	if s := mustTask(t, APIRegisterProcInfo, same).Items[0].Spec; s.CrontabRule != "@hourly" {
		t.Errorf("both spellings agreeing: %+v", s)
	}
	// Not periodic: the rule has no effect and is not kept.
	if s := mustTask(t, APIRegisterProcInfo, edit(t, regBase, mp+"crotab_rule", "nonsense")).Items[0].Spec; s.CrontabRule != "" {
		t.Errorf("resident kept a rule: %+v", s)
	}
}

func TestRegistryOps(t *testing.T) {
	for api, op := range map[string]proc.OpType{
		APIRegisterProcInfo: proc.OpSpecRegister, APIUpdateProcInfo: proc.OpSpecUpdate, APIUnregisterProcInfo: proc.OpSpecUnregister,
	} {
		task := mustTask(t, api, regBase)
		if task.Op != op || len(task.Items) != 2 || !Synchronous(api) {
			t.Errorf("%s: %v", api, task)
		}
		if (task.Items[0].Spec == nil) != (op == proc.OpSpecUnregister) {
			t.Errorf("%s: spec %+v", api, task.Items[0].Spec)
		}
	}
	// unregister ignores whatever spec it is sent.
	mustTask(t, APIUnregisterProcInfo, edit(t, regBase, "spec", map[string]any{"identity": 1}))
	mustTask(t, APIUnregisterProcInfo, edit(t, regBase, "spec", absent{}))
	s := mustTask(t, APIRegisterProcInfo, regBase).Items[0].Spec
	if len(s.ConfigMap) != 1 || s.ConfigMap[0].MD5 != "0123456789abcdef0123456789abcdef" || s.MemLimit != 10.5 {
		t.Errorf("spec %+v", s)
	}
	if _, err := DecodeProcInfo([]byte(regBase), proc.OpStart); err == nil {
		t.Error("DecodeProcInfo accepted a non-registry op")
	}
}

func TestOperateProcMultiShapes(t *testing.T) {
	withSpec := edit(t, multiBase, "proc_operate_req.1.spec", mustJSON(t, regBase, "spec"))
	for _, body := range []string{withSpec, mustJSONText(t, withSpec, "proc_operate_req")} {
		task := mustTask(t, APIOperateProcMulti, body)
		if task.Op != proc.OpStart || len(task.Items) != 2 {
			t.Fatalf("task %v", task)
		}
		if task.Items[0].Spec != nil || task.Items[1].Spec == nil || task.Items[1].Spec.ProcName != "p" {
			t.Fatalf("specs %+v %+v", task.Items[0].Spec, task.Items[1].Spec)
		}
		if task.Items[1].Key() != "0:0:10.0.0.1:gse:b" {
			t.Fatalf("key %s", task.Items[1].Key())
		}
	}
}

func TestAcceptedShapes(t *testing.T) {
	for _, c := range []struct {
		api      string
		metaForm bool
		want     string
	}{
		{APIOperateProcess, false, `{"result":true,"code":0,"message":"success","data":{"task_id":"GSETASK:1"}}`},
		{APIOperateProcMulti, false, `{"result":true,"code":0,"message":"success","data":{"task_id":"GSETASK:1"}}`},
		{APIOperateProc, false, `{"result":true,"code":0,"message":"success","data":{"bk_gse_taskid":"GSETASK:1"}}`},
		{APIOperateProcV2, false, `{"result":true,"code":0,"message":"success","data":{"bk_gse_taskid":"GSETASK:1"}}`},
		{APIManageProc, false, `{"result":true,"code":0,"message":"success","data":{"bk_gse_taskid":"GSETASK:1"}}`},
		// GSE 2.0's meta form is read back by data.task_id.
		{APIOperateProc, true, `{"result":true,"code":0,"message":"success","data":{"task_id":"GSETASK:1"}}`},
		{APIOperateProcV2, true, `{"result":true,"code":0,"message":"success","data":{"task_id":"GSETASK:1"}}`},
	} {
		b, _ := json.Marshal(Accepted(&Task{API: c.api, MetaForm: c.metaForm}, "GSETASK:1"))
		if string(b) != c.want || Synchronous(c.api) {
			t.Errorf("%s (meta form %v): %s", c.api, c.metaForm, b)
		}
	}
	if r := Accepted(&Task{API: "nope"}, "GSETASK:1"); r.Result || r.Code != CodeBadRequest {
		t.Errorf("unknown api: %+v", r)
	}
}

func TestSyncResponseFillsPending(t *testing.T) {
	task := mustTask(t, APIRegisterProcInfo, regBase)
	done := task.Items[0].Key()
	resp := SyncResponse(task, []proc.KeyedResult{{Key: done, HostResult: proc.HostResult{Code: proc.CodeSuccess, Message: "success"}}})
	b, _ := json.Marshal(resp)
	want := `{"result":true,"code":0,"message":"success","data":{"0:0:10.0.0.1:gse:p":{"error_code":0,"error_msg":"success","content":""},"0:0:10.0.0.2:gse:p":{"error_code":115,"error_msg":"in progress","content":""}}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func TestTaskNeverCarriesCredentials(t *testing.T) {
	body := edit(t, opBase, "bk_app_secret", "s3cret-value")
	task := mustTask(t, APIOperateProc, body)
	if task.Caller.AppSecret != "s3cret-value" || task.Caller.AppCode != "esb_test" {
		t.Fatalf("caller %+v", task.Caller)
	}
	b, _ := json.Marshal(task)
	if strings.Contains(string(b), "s3cret") || strings.Contains(task.String(), "s3cret") {
		t.Fatalf("credentials leak: %s / %s", b, task)
	}
}

func TestAccounts(t *testing.T) {
	for _, ok := range []string{"", "root", "www-data", "svc_1", "_apt", "Administrator", `CORP\svc`, `NT AUTHORITY\SYSTEM`, "svc@corp.example.com", "WS01$", "管理员"} {
		if err := validateAccount("a", ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"-u", " root", "root ", "ro ot;", "a/b", `\svc`, `CORP\`, "svc@", "a$b", "$", "r\noot", "a`id`", "$(id)"} {
		if err := validateAccount("a", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPidFileDirRule(t *testing.T) {
	for in, want := range map[string]string{
		"/run/x/": "/run/x/svc.pid", "/run/x/svc.pid": "/run/x/svc.pid", `C:\run\`: `C:\run\svc.pid`, "": "",
	} {
		if got := pidFile(in, "svc"); got != want {
			t.Errorf("pidFile(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestQueries(t *testing.T) {
	r, err := DecodeResultQuery([]byte(`{"bk_app_code":"x","task_id":"GSETASK:20260101000000:1"}`))
	if err != nil || r.TaskID != "GSETASK:20260101000000:1" || r.AppCode != "x" {
		t.Fatalf("%+v %v", r, err)
	}
	if r, err := DecodeResultQuery([]byte(`{"bk_biz_id":2,"bk_gse_taskid":"GSETASK:1"}`)); err != nil || r.TaskID != "GSETASK:1" {
		t.Fatalf("%+v %v", r, err)
	}
	s, err := DecodeStatusQuery([]byte(`{"meta":{"namespace":"gse","name":"p","labels":{"a":"b"}},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":1,"bk_supplier_id":2}]}`))
	if err != nil || s.Namespace != "gse" || s.Name != "p" || len(s.Targets) != 1 || s.Targets[0] != (proc.Target{CloudID: 1, SupplierID: 2, IP: "10.0.0.1"}) {
		t.Fatalf("%+v %v", s, err)
	}
	for body, want := range map[string]SyncQuery{
		`{"meta":{"namespace":"gse"}}`:                                 {Namespace: "gse", Limit: 100},
		`{"meta":{"namespace":"gse","name":"p"},"page":{"start":5}}`:   {Namespace: "gse", Name: "p", Start: 5, Limit: 100},
		`{"meta":{"namespace":"gse"},"page":{"start":0,"limit":1000}}`: {Namespace: "gse", Limit: 1000},
		`{"meta":{"namespace":"gse"},"page":{"limit":1}}`:              {Namespace: "gse", Limit: 1},
	} {
		q, err := DecodeSyncQuery([]byte(body))
		if err != nil || *q != want {
			t.Errorf("%s: %+v %v", body, q, err)
		}
	}
}

func TestAPIsOrder(t *testing.T) {
	bodies := map[string]string{
		APIOperateProcess:   `{"meta":{"namespace":"a","name":"b"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0,"bk_supplier_id":0}],"op_type":2}`,
		APIOperateProc:      opBase,
		APIOperateProcV2:    opBase,
		APIOperateProcMulti: multiBase,
		APIManageProc:       manageBase,
	}
	for i, api := range APIs {
		body, ok := bodies[api]
		if !ok {
			body = regBase
		}
		_, err := DecodeTask(api, []byte(body))
		var fe *FieldError
		isAPIErr := errors.As(err, &fe) && fe.Field == "api"
		if (i < 8) == isAPIErr {
			t.Errorf("APIs[%d] %s: %v", i, api, err)
		}
	}
}

// TestOutcomeOfAPendingHostIsNotAFailure: a call's outcome fails only for
// a host that ended non-zero; one still pending (115) has not ended.
func TestOutcomeOfAPendingHostIsNotAFailure(t *testing.T) {
	ok, running, failed := proc.KeyedResult{Key: "a", HostResult: proc.HostResult{Code: proc.CodeSuccess}},
		proc.KeyedResult{Key: "b", HostResult: proc.HostResult{Code: proc.CodeRunning}},
		proc.KeyedResult{Key: "c", HostResult: proc.HostResult{Code: proc.CodeUnreachable}}
	for _, tc := range []struct {
		res  []proc.KeyedResult
		want Outcome
	}{
		{[]proc.KeyedResult{ok}, OutcomeOK},
		{[]proc.KeyedResult{ok, running}, OutcomeOK},
		{[]proc.KeyedResult{ok, running, failed}, OutcomeHostsFailed},
	} {
		if got := outcomeOf(tc.res); got != tc.want {
			t.Errorf("outcomeOf(%v) = %v, want %v", tc.res, got, tc.want)
		}
	}
}
