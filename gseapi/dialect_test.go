package gseapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
)

// metaForm is operate_proc_v2's GSE 2.0 body as the node manager's Go
// successor builds it: agent ids, no supplier, alive_monitor_policy with a
// null op_timeout, no resource, integer labels and fields drover ignores.
const metaForm = `{"meta":{"namespace":"nodeman","name":"gseagent","labels":{"bk_biz_id":2,"bk_host_id":1001,"env":"prod"}},
	"agent_id_list":["0200000000005254001e8a8b1690000000a1","3:10.0.0.9"],
	"hosts":[{"ip":"10.9.9.9","bk_cloud_id":9}],
	"op_type":0,"no_request":true,"nodeman_spec":{"x":1},
	"spec":{"identity":{"index_key":"","proc_name":"gse_agent","setup_path":"/usr/local/gse/agent/bin",
		"pid_path":"/var/run/gse/","user":"root","config_path":"","log_path":""},
		"control":{"start_cmd":"./gsectl start","stop_cmd":"./gsectl stop"},
		"alive_monitor_policy":{"auto_type":1,"start_check_secs":9,"op_timeout":null}}}`

func TestMetaFormOfOperateProc(t *testing.T) {
	for _, api := range []string{APIOperateProc, APIOperateProcV2} {
		task := mustTask(t, api, metaForm)
		if !task.MetaForm || task.Op != proc.OpStart || len(task.Items) != 2 {
			t.Fatalf("%s: %+v", api, task)
		}
		opaque, cloudIP := task.Items[0], task.Items[1]
		// agent_id_list wins over hosts; a cloud:ip id names its host at once.
		if opaque.Target.Resolved() || opaque.Target.AgentID != "0200000000005254001e8a8b1690000000a1" {
			t.Errorf("opaque id: %+v", opaque.Target)
		}
		if cloudIP.Target != (proc.Target{CloudID: 3, IP: "10.0.0.9", AgentID: "3:10.0.0.9"}) {
			t.Errorf("cloud:ip id: %+v", cloudIP.Target)
		}
		s := opaque.Spec
		if s == nil || s.StartCheck != 9*time.Second || s.OpTimeout != 0 || s.CPULimit != 0 || s.AutoType != proc.AutoResident ||
			s.PidPath != "/var/run/gse/gse_agent.pid" || string(s.Labels["bk_host_id"]) != "1001" || string(s.Labels["env"]) != `"prod"` {
			t.Errorf("spec %+v", s)
		}
		b, _ := json.Marshal(Accepted(task, "GSETASK:1"))
		if !strings.Contains(string(b), `"data":{"task_id":"GSETASK:1"}`) {
			t.Errorf("%s answers %s", api, b)
		}
	}
	// The older node-manager client posts the operate_process body here.
	task := mustTask(t, APIOperateProc, `{"meta":{"namespace":"gse","name":"p"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0}],"op_type":2}`)
	if !task.MetaForm || task.Items[0].Spec != nil || task.Items[0].Key() != "0:0:10.0.0.1:gse:p" {
		t.Errorf("operate_process body: %+v", task.Items[0])
	}
}

func TestOperateProcFormsAreTold(t *testing.T) {
	both := strings.Replace(metaForm, `"op_type":0`, `"op_type":0,"bk_biz_id":2,"process_infos":[]`, 1)
	for _, c := range []struct{ name, body, field string }{
		{"both forms", both, "meta"},
		{"meta and bk_biz_id", strings.Replace(metaForm, `"op_type":0`, `"op_type":0,"bk_biz_id":2`, 1), "meta"},
		{"neither form", `{"op_type":0,"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0}]}`, "(body)"},
		{"meta form empty agent list", strings.Replace(metaForm, `"agent_id_list":["0200000000005254001e8a8b1690000000a1","3:10.0.0.9"]`, `"agent_id_list":[]`, 1), "agent_id_list"},
	} {
		_, err := DecodeTask(APIOperateProcV2, []byte(c.body))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want a field error on %s", c.name, err, c.field)
		}
	}
}

// TestStatusLookupSpec: a status whose spec only names the process probes
// the registered spec, never a 400.
func TestStatusLookupSpec(t *testing.T) {
	body := `{"proc_operate_req":[{"meta":{"namespace":"nodeman","name":"exporter"},"op_type":2,
		"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0}],
		"spec":{"identity":{"index_key":"","proc_name":"exporter","setup_path":"","pid_path":"","user":""},
			"control":{"start_cmd":"","stop_cmd":""},"resource":{"cpu":0,"mem":0},
			"monitor_policy":{"auto_type":0,"start_check_secs":0}}}]}`
	task := mustTask(t, APIOperateProcMulti, body)
	if task.Items[0].Spec != nil {
		t.Fatalf("a lookup spec must probe the registered one: %+v", task.Items[0].Spec)
	}
	// The same spec for a control op is a spec to act on, and its paths
	// are needed.
	_, err := DecodeTask(APIOperateProcMulti, []byte(strings.Replace(body, `"op_type":2`, `"op_type":0`, 1)))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "proc_operate_req[0].spec.identity.setup_path" {
		t.Errorf("control op with a lookup spec: %v", err)
	}
}

// TestTolerantReadings: what the documents do not forbid is accepted, with
// the reading docs/http-api.md documents.
func TestTolerantReadings(t *testing.T) {
	pi := "process_infos.0."
	mp := "spec.monitor_policy."
	periodic := edit(t, regBase, mp+"auto_type", 0)
	cases := []struct {
		name, api, body string
		ok              func(proc.Spec) bool
	}{
		{"check end before begin: one check at the begin", APIOperateProcV2,
			edit(t, edit(t, opBase, pi+"start_check_begin_time", 5), pi+"start_check_end_time", 1),
			func(s proc.Spec) bool { return s.StartCheck == 5*time.Second && s.StartCheckEnd == 0 }},
		{"negative waits and counts: the defaults", APIOperateProcV2,
			edit(t, edit(t, edit(t, edit(t, opBase, pi+"start_check_begin_time", -1), pi+"op_timeout", -1), pi+"instance_num", -1), pi+"cycle_time", -10),
			func(s proc.Spec) bool {
				return s.StartCheck == 0 && s.OpTimeout == 0 && s.InstanceNum == 0 && s.CycleTime == 0
			}},
		{"periodic without cycle_time: runs when started", APIOperateProcV2, edit(t, opBase, pi+"type", 0),
			func(s proc.Spec) bool { return s.AutoType == proc.AutoPeriodic && s.CycleTime == 0 }},
		{"periodic without a rule: runs when started", APIRegisterProcInfo, periodic,
			func(s proc.Spec) bool { return s.AutoType == proc.AutoPeriodic && s.CrontabRule == "" }},
		{"manage_proc without proc_owner: no contact", APIManageProc, edit(t, manageBase, pi+"proc_owner", absent{}),
			func(s proc.Spec) bool { return s.Contact == "" }},
		{"manage_proc contact and proc_owner differ: proc_owner", APIManageProc, edit(t, manageBase, pi+"contact", "someone"),
			func(s proc.Spec) bool { return s.Contact == "ops" }},
		{"no control: default commands", APIRegisterProcInfo, edit(t, regBase, "spec.control", absent{}),
			func(s proc.Spec) bool { return s.StartCmd == "" && s.StopCmd == "" }},
		{"no resource: no limits", APIRegisterProcInfo, edit(t, regBase, "spec.resource", absent{}),
			func(s proc.Spec) bool { return s.CPULimit == 0 && s.MemLimit == 0 }},
		{"no cpu: no cpu limit", APIRegisterProcInfo, edit(t, regBase, "spec.resource.cpu", absent{}),
			func(s proc.Spec) bool { return s.CPULimit == 0 && s.MemLimit == 10.5 }},
		{"no monitor_policy: resident", APIRegisterProcInfo, edit(t, regBase, "spec.monitor_policy", absent{}),
			func(s proc.Spec) bool { return s.AutoType == proc.AutoResident }},
		{"no auto_type: resident", APIRegisterProcInfo, edit(t, regBase, mp+"auto_type", absent{}),
			func(s proc.Spec) bool { return s.AutoType == proc.AutoResident }},
		{"alive_monitor_policy is monitor_policy", APIRegisterProcInfo,
			strings.Replace(edit(t, regBase, mp+"start_retries", 7), `"monitor_policy"`, `"alive_monitor_policy"`, 1),
			func(s proc.Spec) bool { return s.StartRetries == 7 }},
		{"no user: the default account", APIRegisterProcInfo, edit(t, regBase, "spec.identity.user", absent{}),
			func(s proc.Spec) bool { return s.Account == "" }},
		{"negative check, retries and interval: the defaults", APIRegisterProcInfo,
			edit(t, edit(t, edit(t, regBase, mp+"start_check_secs", -5), mp+"start_retries", -1), mp+"start_interval", -1),
			func(s proc.Spec) bool { return s.StartCheck == 0 && s.StartRetries == 0 && s.StartInterval == 0 }},
		{"both cron spellings: crontab_rule", APIRegisterProcInfo,
			edit(t, edit(t, periodic, mp+"crontab_rule", "* * * * *"), mp+"crotab_rule", "*/5 * * * *"),
			func(s proc.Spec) bool { return s.CrontabRule == "* * * * *" }},
		{"configmap path with an empty md5: no expected checksum", APIRegisterProcInfo, edit(t, regBase, "spec.configmap.0.md5", ""),
			func(s proc.Spec) bool { return len(s.ConfigMap) == 1 && s.ConfigMap[0].MD5 == "" }},
		{"configmap md5 that is no md5: kept, and drift shows it", APIRegisterProcInfo, edit(t, regBase, "spec.configmap.0.md5", "XYZ"),
			func(s proc.Spec) bool { return s.ConfigMap[0].MD5 == "xyz" }},
		{"configmap md5 without a path: dropped", APIRegisterProcInfo, edit(t, regBase, "spec.configmap.0.path", ""),
			func(s proc.Spec) bool { return len(s.ConfigMap) == 0 }},
		{"configmap path twice: the last entry", APIRegisterProcInfo, edit(t, regBase, "spec.configmap", []any{
			map[string]any{"path": "/a", "md5": strings.Repeat("a", 32)}, map[string]any{"path": "/a", "md5": strings.Repeat("b", 32)}}),
			func(s proc.Spec) bool { return len(s.ConfigMap) == 1 && s.ConfigMap[0].MD5 == strings.Repeat("b", 32) }},
		{"reserved fd negative: not given", APIRegisterProcInfo, edit(t, regBase, "spec.resource.fd", -1),
			func(proc.Spec) bool { return true }},
		{"update with the register body", APIUpdateProcInfo, regBase,
			func(s proc.Spec) bool { return s.ProcName == "p" }},
	}
	for _, c := range cases {
		task, err := DecodeTask(c.api, []byte(c.body))
		if err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
			continue
		}
		if s := task.Items[0].Spec; s == nil || !c.ok(*s) {
			t.Errorf("%s: spec %+v", c.name, s)
		}
	}
}

func TestHostsWithoutSupplier(t *testing.T) {
	task := mustTask(t, APIOperateProcess, `{"meta":{"namespace":"gse","name":"p"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":2}],"op_type":2}`)
	if it := task.Items[0]; it.Target.SupplierID != 0 || it.Key() != "2:0:10.0.0.1:gse:p" || it.KeyV2() != "2:10.0.0.1:gse:p" {
		t.Errorf("item %+v key %s / %s", it.Target, it.Key(), it.KeyV2())
	}
}

type directory map[string]proc.Target

func (d directory) AgentHost(id string) (proc.Target, bool) { t, ok := d[id]; return t, ok }

func (d directory) HostAgent(h proc.HostID) string {
	for id, t := range d {
		if t.HostID() == h {
			return id
		}
	}
	return ""
}

func TestAgentOf(t *testing.T) {
	d := directory{"abc123": {CloudID: 1, IP: "10.0.0.1"}}
	for _, c := range []struct {
		e    any
		t    proc.Target
		want string
	}{
		{d, proc.Target{CloudID: 1, IP: "10.0.0.1", AgentID: "1:10.0.0.1"}, "1:10.0.0.1"}, // as sent
		{d, proc.Target{CloudID: 1, IP: "10.0.0.1"}, "abc123"},                            // the host's own
		{d, proc.Target{CloudID: 2, IP: "10.0.0.2"}, "2:10.0.0.2"},                        // none: cloud:ip
		{nil, proc.Target{CloudID: 1, IP: "10.0.0.1"}, "1:10.0.0.1"},                      // no directory
		{d, proc.Target{AgentID: "nope"}, "nope"},                                         // unmapped
	} {
		if got := agentOf(c.e, c.t); got != c.want {
			t.Errorf("agentOf(%+v) = %q, want %q", c.t, got, c.want)
		}
	}
}

// TestResultKeyForms: each API answers under the key its callers look up.
func TestResultKeyForms(t *testing.T) {
	task := mustTask(t, APIOperateProcMulti, `{"proc_operate_req":[{"meta":{"namespace":"ns","name":"p"},"op_type":1,
		"agent_id_list":["abc123","7:10.0.0.7","unknown"]},{"meta":{"namespace":"ns","name":"q"},"op_type":1,
		"hosts":[{"ip":"10.0.0.8","bk_cloud_id":8,"bk_supplier_id":1}]}]}`)
	resolveAgents(directory{"abc123": {CloudID: 1, SupplierID: 4, IP: "10.0.0.1"}}, task.Items)
	results := make([]proc.KeyedResult, len(task.Items))
	for i, it := range task.Items {
		results[i] = proc.KeyedResult{Key: it.Key(), AgentID: it.Target.AgentID}
	}
	var v1, v2 []string
	for _, r := range results {
		v1, v2 = append(v1, r.Key), append(v2, proc.KeyV2Of(r))
	}
	want1 := []string{"1:4:10.0.0.1:ns:p", "7:0:10.0.0.7:ns:p", "unknown:ns:p", "8:1:10.0.0.8:ns:q"}
	want2 := []string{"abc123:ns:p", "7:10.0.0.7:ns:p", "unknown:ns:p", "8:10.0.0.8:ns:q"}
	if strings.Join(v1, " ") != strings.Join(want1, " ") || strings.Join(v2, " ") != strings.Join(want2, " ") {
		t.Errorf("v1 %v\nwant %v\nv2 %v\nwant %v", v1, want1, v2, want2)
	}
	for i, it := range task.Items {
		if it.KeyV2() != want2[i] {
			t.Errorf("item %d KeyV2 %s, want %s", i, it.KeyV2(), want2[i])
		}
	}
}

// The job platform's operate_proc v2 sends value_key as setup_path plus
// proc_name, the documented default index: it names the process in result
// keys as sent. A ':' would split into another key, and is refused.
func TestValueKeyThatIsAPath(t *testing.T) {
	body := func(valueKey string) string {
		return `{"bk_biz_id":7,"op_type":2,"process_infos":[{"ip_list":[{"ip":"10.0.0.1","bk_cloud_id":0}],` +
			`"proc_name":"appd","setup_path":"/data/app/sbin","pid_path":"/data/app/appd.pid","value_key":"` + valueKey + `"}]}`
	}
	for _, api := range []string{APIOperateProc, APIOperateProcV2} {
		task := mustTask(t, api, body("/data/app/sbin/appd"))
		it := task.Items[0]
		if it.Key() != "0:0:10.0.0.1:7:/data/app/sbin/appd" || it.Spec.Index() != "/data/app/sbin/appd" {
			t.Errorf("%s: key %q, index %q", api, it.Key(), it.Spec.Index())
		}
		if _, p, err := proc.ParseResultKey(it.Key()); err != nil || p != it.Process {
			t.Errorf("%s: key %q reads back as %+v %v", api, it.Key(), p, err)
		}
		_, err := DecodeTask(api, []byte(body("/data/app:appd")))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "process_infos[0].value_key" || !strings.Contains(fe.Rule, "callers split on ':'") {
			t.Errorf("%s: a value_key with ':' gave %v", api, err)
		}
	}
	// The same process is then named by meta.name, as the CLI's --name does.
	task := mustTask(t, APIOperateProcess, `{"meta":{"namespace":"7","name":"/data/app/sbin/appd"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0}],"op_type":2}`)
	if task.Items[0].Key() != "0:0:10.0.0.1:7:/data/app/sbin/appd" {
		t.Errorf("meta.name: key %q", task.Items[0].Key())
	}
}
