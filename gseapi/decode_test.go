package gseapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
)

func TestSeedExamplesDecode(t *testing.T) {
	type want struct {
		op     proc.OpType
		manage bool
		key    string
		ns     string
		name   string
		spec   bool
	}
	wants := map[string]want{
		APIOperateProcess:     {proc.OpStart, false, "1:2:10.0.0.1:gse:proc-test", "gse", "proc-test", false},
		APIOperateProc:        {proc.OpStop, false, "0:0:10.0.0.1:1:gseagent", "1", "gseagent", true},
		APIOperateProcV2:      {proc.OpStop, false, "0:0:10.0.0.1:1:gseagent", "1", "gseagent", true},
		APIManageProc:         {proc.OpSpecRegister, true, "0:0:10.0.0.1:1:key_test", "1", "key_test", true},
		APIRegisterProcInfo:   {proc.OpSpecRegister, false, "1:2:10.0.0.1:gse:proc-test", "gse", "proc-test", true},
		APIUpdateProcInfo:     {proc.OpSpecUpdate, false, "1:2:10.0.0.1:gse:proc-test", "gse", "proc-test", true},
		APIUnregisterProcInfo: {proc.OpSpecUnregister, false, "1:2:10.0.0.1:gse:proc-test", "gse", "proc-test", false},
	}
	for _, sf := range seedFiles {
		body := exampleOf(t, sf.file)
		for _, api := range sf.apis {
			task, err := DecodeTask(api, body)
			if err != nil {
				t.Errorf("%s as %s: %v", sf.file, api, err)
				continue
			}
			w := wants[api]
			if task.API != api || task.Op != w.op || task.Manage != w.manage || len(task.Items) != 1 {
				t.Errorf("%s as %s: task %v", sf.file, api, task)
				continue
			}
			it := task.Items[0]
			if it.Key() != w.key || it.Process.Namespace != w.ns || it.Process.Name != w.name {
				t.Errorf("%s as %s: key %q process %+v", sf.file, api, it.Key(), it.Process)
			}
			if (it.Spec != nil) != w.spec {
				t.Errorf("%s as %s: spec %+v", sf.file, api, it.Spec)
			}
			if task.Caller.AppSecret != "" && task.Caller.AppSecret != "xxx" {
				t.Errorf("%s as %s: caller %+v", sf.file, api, task.Caller)
			}
		}
	}
}

func TestSeedExampleSpecs(t *testing.T) {
	spec := func(api, file string) *proc.Spec {
		t.Helper()
		task, err := DecodeTask(api, exampleOf(t, file))
		if err != nil {
			t.Fatalf("%s: %v", api, err)
		}
		return task.Items[0].Spec
	}

	v1 := spec(APIOperateProc, "operate_proc.json")
	if v1.ShellExt != proc.ShellBat || v1.CPULimit != 50 || v1.MemLimit != 30 || v1.Account != "root" ||
		v1.SetupPath != "/usr/local/xxx" || v1.PidPath != "/usr/local/xxx" || v1.AutoType != proc.AutoResident {
		t.Errorf("seed 001 spec %+v", v1)
	}

	v2 := spec(APIOperateProcV2, "operate_proc_v2.json")
	if v2.Contact != "root" || v2.ShellExt != "" || v2.OpTimeout != 0 || v2.StartCheck != 0 {
		t.Errorf("seed 002 spec %+v (zero durations must stay zero for the policy defaults)", v2)
	}

	m := spec(APIManageProc, "manage_proc.json")
	wantM := proc.Spec{
		ProcName: "nginx", SetupPath: "/data/home/nginx/bin/", PidPath: "/data/var/run/nginx/nginx.pid",
		ConfigPath: "/data/etc/nginx.conf", LogPath: "/data/logs/nginx/", Contact: "root",
		StartCmd: "echo start", StopCmd: "echo stop", RestartCmd: "echo restart", ReloadCmd: "echo reload", KillCmd: "echo kill",
		ValueKey: "key_test", InstanceNum: 2, CPULimit: 20, MemLimit: 30,
		AutoType: proc.AutoOneShot, CycleTime: 10 * time.Second,
		StartCheck: 5 * time.Second, StartCheckEnd: 5 * time.Second, OpTimeout: 5 * time.Second,
	}
	if !specEqual(*m, wantM) {
		t.Errorf("seed 003 spec\n got %+v\nwant %+v", *m, wantM)
	}

	r := spec(APIRegisterProcInfo, "register_proc_info.json")
	wantR := proc.Spec{
		ProcName: "proc-test", SetupPath: "/data/gsetest/", PidPath: "/data/gsetest/proc-test.pid",
		ConfigPath: "/data/gsetest/proc-test.conf", LogPath: "/data/gsetest/logs/", Account: "root",
		Labels:   map[string]json.RawMessage{"proc_name": json.RawMessage(`"proc-test"`)},
		StartCmd: "./start.sh", StopCmd: "./stop.sh", RestartCmd: "./restart.sh", ReloadCmd: "./reload.sh",
		KillCmd: "./kill.sh", VersionCmd: "./version.sh", HealthCmd: "./health.sh",
		CPULimit: 10, MemLimit: 10, AutoType: proc.AutoResident,
		StartCheck: 5 * time.Second, StopCheck: 5 * time.Second, StartRetries: 3, StartInterval: 20 * time.Second,
	}
	if !specEqual(*r, wantR) {
		t.Errorf("seed 004 spec\n got %+v\nwant %+v", *r, wantR)
	}
	if pr, err := DecodeProcInfo(exampleOf(t, "register_proc_info.json"), proc.OpSpecRegister); err != nil ||
		pr.Reserved() != (Reserved{FD: 10000, Disk: 100}) {
		t.Errorf("seed 004 reserved %+v %v", pr.Reserved(), err)
	}
}

func specEqual(a, b proc.Spec) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// Bases for the malformed-request table; each case breaks one field.
const (
	opBase = `{"bk_app_code":"esb_test","bk_biz_id":1,"op_type":0,"process_infos":[
		{"setup_path":"/data/app","proc_name":"svc","pid_path":"/data/app/svc.pid","account":"root",
		 "ip_list":[{"bk_cloud_id":0,"ip":"10.0.0.1"},{"bk_cloud_id":0,"ip":"10.0.0.2"}]}]}`
	manageBase = `{"bk_scope_type":"biz","bk_scope_id":"3","op_type":1,"process_infos":[
		{"proc_name":"nginx","proc_owner":"ops","ip_list":[{"bk_cloud_id":0,"ip":"10.0.0.1"}]}]}`
	regBase = `{"meta":{"namespace":"gse","name":"p"},
		"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0,"bk_supplier_id":0},{"ip":"10.0.0.2","bk_cloud_id":0,"bk_supplier_id":0}],
		"spec":{"identity":{"proc_name":"p","setup_path":"/data/p","pid_path":"/data/p/p.pid","user":"root"},
			"control":{"start_cmd":"./start.sh"},"resource":{"cpu":10,"mem":10.5},
			"monitor_policy":{"auto_type":1},
			"configmap":[{"path":"/data/p/p.conf","md5":"0123456789abcdef0123456789ABCDEF"}]}}`
	multiBase = `{"proc_operate_req":[
		{"meta":{"namespace":"gse","name":"a"},"op_type":0,"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0,"bk_supplier_id":0}]},
		{"meta":{"namespace":"gse","name":"b"},"op_type":0,"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0,"bk_supplier_id":0}]}]}`
)

func TestDecodeTaskRejects(t *testing.T) {
	pi := "process_infos.0."
	mp := "spec.monitor_policy."
	cases := []struct {
		name, api, body, field string
	}{
		// operate_proc / operate_proc_v2
		{"biz missing", APIOperateProc, edit(t, opBase, "bk_biz_id", absent{}), "bk_biz_id"},
		{"biz negative", APIOperateProc, edit(t, opBase, "bk_biz_id", -1), "bk_biz_id"},
		{"biz object", APIOperateProc, edit(t, opBase, "bk_biz_id", map[string]any{}), "bk_biz_id"},
		{"biz not a number", APIOperateProc, edit(t, opBase, "bk_biz_id", "one"), "bk_biz_id"},
		{"op_type missing", APIOperateProcV2, edit(t, opBase, "op_type", absent{}), "op_type"},
		{"op_type string", APIOperateProcV2, edit(t, opBase, "op_type", "1"), "op_type"},
		{"process_infos missing", APIOperateProc, edit(t, opBase, "process_infos", absent{}), "process_infos"},
		{"process_infos empty", APIOperateProc, edit(t, opBase, "process_infos", []any{}), "process_infos"},
		{"process_infos object", APIOperateProc, edit(t, opBase, "process_infos", map[string]any{}), "process_infos"},
		{"setup_path missing", APIOperateProc, edit(t, opBase, pi+"setup_path", absent{}), "process_infos[0].setup_path"},
		{"setup_path relative", APIOperateProc, edit(t, opBase, pi+"setup_path", "data/app"), "process_infos[0].setup_path"},
		{"proc_name missing", APIOperateProc, edit(t, opBase, pi+"proc_name", absent{}), "process_infos[0].proc_name"},
		{"proc_name with slash", APIOperateProc, edit(t, opBase, pi+"proc_name", "bin/svc"), "process_infos[0].proc_name"},
		{"proc_name with NUL", APIOperateProc, edit(t, opBase, pi+"proc_name", "s\x00vc"), "process_infos[0].proc_name"},
		{"proc_name with colon", APIOperateProc, edit(t, opBase, pi+"proc_name", "a:b"), "process_infos[0].proc_name"},
		{"pid_path missing", APIOperateProc, edit(t, opBase, pi+"pid_path", absent{}), "process_infos[0].pid_path"},
		{"pid_path relative", APIOperateProc, edit(t, opBase, pi+"pid_path", "svc.pid"), "process_infos[0].pid_path"},
		{"cfg_path relative", APIOperateProcV2, edit(t, opBase, pi+"cfg_path", "etc/svc.conf"), "process_infos[0].cfg_path"},
		{"log_path relative", APIOperateProc, edit(t, opBase, pi+"log_path", "./log"), "process_infos[0].log_path"},
		{"account leading dash", APIOperateProc, edit(t, opBase, pi+"account", "-root"), "process_infos[0].account"},
		{"account shell", APIOperateProc, edit(t, opBase, pi+"account", "root;reboot"), "process_infos[0].account"},
		{"shell ext unknown", APIOperateProc, edit(t, opBase, pi+"cmd_shell_ext", "exe"), "process_infos[0].cmd_shell_ext"},
		{"cpu over 100", APIOperateProc, edit(t, opBase, pi+"cpu_lmt", 101), "process_infos[0].cpu_lmt"},
		{"mem negative", APIOperateProc, edit(t, opBase, pi+"mem_lmt", -0.5), "process_infos[0].mem_lmt"},
		{"cpu string", APIOperateProc, edit(t, opBase, pi+"cpu_lmt", "50"), "process_infos[0].cpu_lmt"},
		{"ip_list missing", APIOperateProc, edit(t, opBase, pi+"ip_list", absent{}), "process_infos[0].ip_list"},
		{"ip_list empty", APIOperateProc, edit(t, opBase, pi+"ip_list", []any{}), "process_infos[0].ip_list"},
		{"ip bad", APIOperateProc, edit(t, opBase, pi+"ip_list.1.ip", "10.0.0.256"), "process_infos[0].ip_list[1].ip"},
		{"ip missing", APIOperateProc, edit(t, opBase, pi+"ip_list.0.ip", absent{}), "process_infos[0].ip_list[0].ip"},
		{"cloud missing", APIOperateProc, edit(t, opBase, pi+"ip_list.0.bk_cloud_id", absent{}), "process_infos[0].ip_list[0].bk_cloud_id"},
		{"cloud negative", APIOperateProc, edit(t, opBase, pi+"ip_list.1.bk_cloud_id", -2), "process_infos[0].ip_list[1].bk_cloud_id"},
		{"cloud string", APIOperateProc, edit(t, opBase, pi+"ip_list.1.bk_cloud_id", "0"), "process_infos[0].ip_list[1].bk_cloud_id"},
		{"duplicate ip", APIOperateProc, edit(t, opBase, pi+"ip_list.1.ip", "10.0.0.1"), "process_infos[0].ip_list[1]"},
		{"duplicate process", APIOperateProc, edit(t, opBase, "process_infos", []any{mustJSON(t, opBase, "process_infos.0"), mustJSON(t, opBase, "process_infos.0")}), "process_infos[1].ip_list[0]"},
		{"start_cmd NUL", APIOperateProcV2, edit(t, opBase, pi+"start_cmd", "./start.sh\x00"), "process_infos[0].start_cmd"},
		{"stop_cmd too long", APIOperateProcV2, edit(t, opBase, pi+"stop_cmd", strings.Repeat("x", MaxCommandBytes+1)), "process_infos[0].stop_cmd"},
		{"type unknown", APIOperateProcV2, edit(t, opBase, pi+"type", 3), "process_infos[0].type"},
		{"op_timeout too long", APIOperateProcV2, edit(t, opBase, pi+"op_timeout", 86401), "process_infos[0].op_timeout"},
		{"value_key with colon", APIOperateProcV2, edit(t, opBase, pi+"value_key", "a:b"), "process_infos[0].value_key"},
		{"func_id object", APIOperateProcV2, edit(t, opBase, pi+"func_id", map[string]any{}), "process_infos[0].func_id"},
		{"func_id float", APIOperateProcV2, edit(t, opBase, pi+"func_id", raw("1.5")), "process_infos[0].func_id"},
		{"contact newline", APIOperateProcV2, edit(t, opBase, pi+"contact", "a\nb"), "process_infos[0].contact"},

		// manage_proc
		{"scope type missing", APIManageProc, edit(t, manageBase, "bk_scope_type", absent{}), "bk_scope_type"},
		{"scope type bad", APIManageProc, edit(t, manageBase, "bk_scope_type", "cloud"), "bk_scope_type"},
		{"scope id missing", APIManageProc, edit(t, manageBase, "bk_scope_id", absent{}), "bk_scope_id"},
		{"scope id empty", APIManageProc, edit(t, manageBase, "bk_scope_id", ""), "bk_scope_id"},
		{"scope id float", APIManageProc, edit(t, manageBase, "bk_scope_id", raw("1.5")), "bk_scope_id"},
		{"scope id negative", APIManageProc, edit(t, manageBase, "bk_scope_id", -3), "bk_scope_id"},
		{"scope id colon", APIManageProc, edit(t, manageBase, "bk_scope_id", "1:2"), "bk_scope_id"},
		{"manage op missing", APIManageProc, edit(t, manageBase, "op_type", absent{}), "op_type"},
		{"manage pid relative", APIManageProc, edit(t, manageBase, pi+"pid_path", "run/"), "process_infos[0].pid_path"},

		// register / update / unregister_proc_info
		{"spec missing", APIRegisterProcInfo, edit(t, regBase, "spec", absent{}), "spec"},
		{"update spec missing", APIUpdateProcInfo, edit(t, regBase, "spec", absent{}), "spec"},
		{"identity missing", APIRegisterProcInfo, edit(t, regBase, "spec.identity", absent{}), "spec.identity"},
		{"identity proc_name missing", APIRegisterProcInfo, edit(t, regBase, "spec.identity.proc_name", absent{}), "spec.identity.proc_name"},
		{"setup relative", APIRegisterProcInfo, edit(t, regBase, "spec.identity.setup_path", "data"), "spec.identity.setup_path"},
		{"pid missing", APIRegisterProcInfo, edit(t, regBase, "spec.identity.pid_path", absent{}), "spec.identity.pid_path"},
		{"config relative", APIRegisterProcInfo, edit(t, regBase, "spec.identity.config_path", "p.conf"), "spec.identity.config_path"},
		{"cpu over", APIRegisterProcInfo, edit(t, regBase, "spec.resource.cpu", 100.5), "spec.resource.cpu"},
		{"cpu string", APIRegisterProcInfo, edit(t, regBase, "spec.resource.cpu", "10"), "spec.resource.cpu"},
		{"mem negative", APIRegisterProcInfo, edit(t, regBase, "spec.resource.mem", -0.1), "spec.resource.mem"},
		{"auto_type bad", APIRegisterProcInfo, edit(t, regBase, mp+"auto_type", 5), "spec.monitor_policy.auto_type"},
		{"stop_check too long", APIRegisterProcInfo, edit(t, regBase, mp+"stop_check_secs", MaxCheckSecs+1), "spec.monitor_policy.stop_check_secs"},
		{"bad cron rule", APIRegisterProcInfo, edit(t, edit(t, regBase, mp+"auto_type", 0), mp+"crontab_rule", "61 * * * *"), "spec.monitor_policy.crontab_rule"},
		{"bad crotab rule", APIRegisterProcInfo, edit(t, edit(t, regBase, mp+"auto_type", 0), mp+"crotab_rule", "every minute"), "spec.monitor_policy.crotab_rule"},
		{"cron zone only", APIRegisterProcInfo, edit(t, edit(t, regBase, mp+"auto_type", 0), mp+"crontab_rule", "TZ=UTC"), "spec.monitor_policy.crontab_rule"},
		{"cron every negative", APIRegisterProcInfo, edit(t, edit(t, regBase, mp+"auto_type", 0), mp+"crotab_rule", "@every -5s"), "spec.monitor_policy.crotab_rule"},
		{"cron never fires", APIRegisterProcInfo, edit(t, edit(t, regBase, mp+"auto_type", 0), mp+"crontab_rule", "0 0 30 2 *"), "spec.monitor_policy.crontab_rule"},
		{"configmap relative", APIRegisterProcInfo, edit(t, regBase, "spec.configmap.0.path", "p.conf"), "spec.configmap[0].path"},
		{"meta name missing", APIRegisterProcInfo, edit(t, regBase, "meta.name", absent{}), "meta.name"},
		{"hosts duplicate", APIUpdateProcInfo, edit(t, regBase, "hosts.1.ip", "10.0.0.1"), "hosts[1]"},
		{"unregister hosts missing", APIUnregisterProcInfo, edit(t, regBase, "hosts", absent{}), "hosts"},
		{"supplier string", APIRegisterProcInfo, edit(t, regBase, "hosts.1.bk_supplier_id", "0"), "hosts[1].bk_supplier_id"},

		// operate_proc_multi
		{"multi missing", APIOperateProcMulti, `{}`, "proc_operate_req"},
		{"multi empty bare", APIOperateProcMulti, `[]`, "(body)"},
		{"multi op differs", APIOperateProcMulti, edit(t, multiBase, "proc_operate_req.1.op_type", 1), "proc_operate_req[1].op_type"},
		{"multi op missing", APIOperateProcMulti, edit(t, multiBase, "proc_operate_req.0.op_type", absent{}), "proc_operate_req[0].op_type"},
		{"multi meta missing", APIOperateProcMulti, edit(t, multiBase, "proc_operate_req.0.meta", absent{}), "proc_operate_req[0].meta.namespace"},
		{"multi duplicate", APIOperateProcMulti, edit(t, multiBase, "proc_operate_req.1.meta.name", "a"), "proc_operate_req[1].hosts[0]"},
		{"multi cloud string", APIOperateProcMulti, edit(t, multiBase, "proc_operate_req.1.hosts.0.bk_cloud_id", "0"), "proc_operate_req[1].hosts[0].bk_cloud_id"},
		{"multi spec bad", APIOperateProcMulti, edit(t, multiBase, "proc_operate_req.0.spec", mustJSON(t, edit(t, regBase, "spec.resource.cpu", 200), "spec")), "proc_operate_req[0].spec.resource.cpu"},
		{"multi bare op differs", APIOperateProcMulti, mustJSONText(t, edit(t, multiBase, "proc_operate_req.1.op_type", 7), "proc_operate_req"), "[1].op_type"},

		// operate_process through DecodeTask
		{"operate_process hosts empty", APIOperateProcess, `{"meta":{"namespace":"gse","name":"p"},"hosts":[],"op_type":0}`, "hosts"},

		// the API name
		{"unknown api", "operate_everything", opBase, "api"},
		{"query api", APIGetProcStatus, opBase, "api"},
	}
	if len(cases) < 40 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		task, err := DecodeTask(c.api, []byte(c.body))
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: want a field error on %s, got task %v err %v", c.name, c.field, task, err)
			continue
		}
		if fe.Field != c.field {
			t.Errorf("%s: field %q, want %q (%v)", c.name, fe.Field, c.field, err)
		}
		if fe.Rule == "" {
			t.Errorf("%s: no rule", c.name)
		}
	}
}

func TestDecodeQueriesRejects(t *testing.T) {
	status := `{"meta":{"namespace":"gse","name":"p"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0,"bk_supplier_id":0}]}`
	sync := `{"meta":{"namespace":"gse"},"page":{"start":0,"limit":10}}`
	cases := []struct {
		name  string
		dec   func([]byte) error
		body  string
		field string
	}{
		{"task_id missing", result, `{}`, "task_id"},
		{"task_id prefix", result, `{"task_id":"TASK:1"}`, "task_id"},
		{"task_id number", result, `{"task_id":1}`, "task_id"},
		{"bk_gse_taskid prefix", result, `{"bk_gse_taskid":"1"}`, "bk_gse_taskid"},
		{"task ids conflict", result, `{"task_id":"GSETASK:1","bk_gse_taskid":"GSETASK:2"}`, "bk_gse_taskid"},
		{"status name missing", statusQ, edit(t, status, "meta.name", absent{}), "meta.name"},
		{"status hosts empty", statusQ, edit(t, status, "hosts", []any{}), "hosts"},
		{"status ip bad", statusQ, edit(t, status, "hosts.0.ip", "host-1"), "hosts[0].ip"},
		{"sync namespace missing", syncQ, edit(t, sync, "meta.namespace", absent{}), "meta.namespace"},
		{"sync limit over", syncQ, edit(t, sync, "page.limit", 1001), "page.limit"},
		{"sync limit zero", syncQ, edit(t, sync, "page.limit", 0), "page.limit"},
		{"sync limit string", syncQ, edit(t, sync, "page.limit", "10"), "page.limit"},
		{"sync start negative", syncQ, edit(t, sync, "page.start", -1), "page.start"},
		{"sync body array", syncQ, `[]`, "(body)"},
	}
	for _, c := range cases {
		err := c.dec([]byte(c.body))
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: want a field error, got %v", c.name, err)
			continue
		}
		if fe.Field != c.field {
			t.Errorf("%s: field %q, want %q (%v)", c.name, fe.Field, c.field, err)
		}
	}
}

func result(b []byte) error  { _, err := DecodeResultQuery(b); return err }
func statusQ(b []byte) error { _, err := DecodeStatusQuery(b); return err }
func syncQ(b []byte) error   { _, err := DecodeSyncQuery(b); return err }

// mustJSON returns the value at a dotted path of doc, for reuse in edit.
func mustJSON(t testing.TB, doc, path string) json.RawMessage {
	t.Helper()
	return json.RawMessage(mustJSONText(t, doc, path))
}

func mustJSONText(t testing.TB, doc, path string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Split(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			var i int
			for _, ch := range p {
				i = i*10 + int(ch-'0')
			}
			v = c[i]
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
