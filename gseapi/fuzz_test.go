package gseapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-sh/drover/proc"
)

// fuzzSeeds are the seed documents' examples and the bases
// of the table tests.
func fuzzSeeds(f *testing.F) [][]byte {
	periodic := edit(f, edit(f, regBase, "spec.monitor_policy.auto_type", 0), "spec.monitor_policy.crotab_rule", "CRON_TZ=UTC */5 * * * *")
	// manage_proc's unregister and an op_type it does not know, beside
	// its register.
	unmanage := edit(f, manageBase, "op_type", 2)
	badManage := edit(f, manageBase, "op_type", 7)
	out := [][]byte{[]byte(opBase), []byte(manageBase), []byte(unmanage), []byte(badManage), []byte(regBase), []byte(multiBase), []byte(periodic), []byte(metaForm)}
	// The dialect's malformed bodies: both operate_proc forms at once, an
	// agent id over 64 characters, an empty agent_id_list.
	out = append(out,
		[]byte(strings.Replace(metaForm, `"op_type":0`, `"op_type":0,"bk_biz_id":2,"process_infos":[]`, 1)),
		[]byte(strings.Replace(metaForm, `"3:10.0.0.9"`, `"`+strings.Repeat("f", 65)+`"`, 1)),
		[]byte(strings.Replace(metaForm, `"agent_id_list":["0200000000005254001e8a8b1690000000a1","3:10.0.0.9"]`, `"agent_id_list":[]`, 1)))
	for _, sf := range seedFiles {
		out = append(out, exampleOf(f, sf.file))
	}
	return out
}

func FuzzDecodeTask(f *testing.F) {
	for _, body := range fuzzSeeds(f) {
		for _, s := range apiTable {
			f.Add(s.name, body)
		}
	}
	f.Add(APIPushConfig, []byte(`{"meta":{"namespace":"web","name":"svc"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0}],`+
		`"files":[{"path":"/data//app/./app.conf","mode":"0640","content":"eA=="}],"then":"reload"}`))
	f.Add(APITailLog, []byte(`{"meta":{"namespace":"web","name":"svc"},"agent_id_list":["0:10.0.0.1"],"tail":5,"grep":"^E"}`))
	f.Fuzz(checkTask)
}

// checkTask decodes body as api and checks what any answer must satisfy:
// an error is a complete FieldError and no task; a task names hosts, keeps
// its API and op, and holds only valid, distinct items.
func checkTask(t *testing.T, api string, body []byte) {
	task, err := DecodeTask(api, body)
	if err != nil {
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field == "" || fe.Rule == "" {
			t.Fatalf("error is not a complete FieldError: %#v", err)
		}
		if task != nil {
			t.Fatal("task with an error")
		}
		return
	}
	if len(task.Items) == 0 {
		t.Fatal("accepted with no items")
	}
	if task.API != api {
		t.Fatalf("API %q for %q", task.API, api)
	}
	if api != APIManageProc && task.Manage {
		t.Fatal("Manage outside manage_proc")
	}
	// The op is the API's own for the registry APIs; manage_proc's
	// op_type 1 registers and manages, 2 unregisters, and any other value
	// is an op no host accepts; the other APIs never touch the registry.
	switch {
	case Synchronous(api):
		want := map[string]proc.OpType{APIRegisterProcInfo: proc.OpSpecRegister,
			APIUpdateProcInfo: proc.OpSpecUpdate, APIUnregisterProcInfo: proc.OpSpecUnregister}[api]
		if task.Op != want {
			t.Fatalf("op %v for %s, want %v", task.Op, api, want)
		}
	case api == APIManageProc:
		if task.Manage != (task.Op == proc.OpSpecRegister) ||
			task.Op != proc.OpSpecRegister && task.Op != proc.OpSpecUnregister && (task.Op.Valid() || task.Op.IsSpecOp()) {
			t.Fatalf("op %v (manage %v) for %s", task.Op, task.Manage, api)
		}
	case task.Op.IsInternal():
		t.Fatalf("drover's own op %v for %s", task.Op, api)
	}
	// File ops come from the file APIs only, with their files, each path
	// absolute and already clean.
	if s, _ := lookup(api); task.Op.IsFileOp() != (task.Files != nil) || task.Op.IsFileOp() != (s.kind == kindFile) {
		t.Fatalf("op %v with files %+v for %s", task.Op, task.Files, api)
	}
	if task.Files != nil {
		for _, f := range task.Files.Files {
			if p, err := proc.CheckRemotePath(f.Path); err != nil || p != f.Path || f.Mode > 0o7777 {
				t.Fatalf("pushed file %+v accepted (%v)", f, err)
			}
		}
	}
	seen := map[string]bool{}
	for _, it := range task.Items {
		checkItem(t, api, it)
		// Registering or updating carries a spec; unregistering does not.
		if Synchronous(api) && (it.Spec == nil) != (task.Op == proc.OpSpecUnregister) {
			t.Fatalf("%s item %s with spec %+v", api, it.Key(), it.Spec)
		}
		if seen[it.Key()] {
			t.Fatalf("duplicate key %s", it.Key())
		}
		seen[it.Key()] = true
	}
}

func checkItem(t *testing.T, api string, it proc.Item) {
	t.Helper()
	// A host is named by a valid ip, or by an agent id still to be mapped.
	if tg := it.Target; tg.CloudID < 0 || tg.SupplierID < 0 || tg.IP == "" && tg.AgentID == "" ||
		len(tg.AgentID) > MaxAgentIDBytes || hasSpaceOrControl(tg.AgentID) {
		t.Fatalf("target %+v", it.Target)
	}
	if validateName("n", it.Process.Namespace) != nil || validateProcessName("n", it.Process.Name) != nil {
		t.Fatalf("process %+v", it.Process)
	}
	// A key must read back as what it was built from (IPv6 addresses
	// contain ':' and cannot round-trip through the documented key form).
	if it.Target.Resolved() && !strings.Contains(it.Target.IP, ":") {
		tg, p, err := proc.ParseResultKey(it.Key())
		want := it.Target
		want.AgentID = ""
		if err != nil || tg != want || p != it.Process {
			t.Fatalf("key %q reads back as %+v %+v %v", it.Key(), tg, p, err)
		}
	}
	s := it.Spec
	if s == nil {
		return
	}
	if s.ProcName == "" || strings.ContainsAny(s.ProcName, `/\`) {
		t.Fatalf("proc name %q", s.ProcName)
	}
	if api != APIManageProc && (s.PidPath == "" || s.SetupPath == "") {
		t.Fatalf("paths %+v", s)
	}
	if s.CPULimit < 0 || s.CPULimit > 100 || s.MemLimit < 0 || s.MemLimit > 100 {
		t.Fatalf("limits %v %v", s.CPULimit, s.MemLimit)
	}
	for _, d := range []int64{int64(s.CycleTime), int64(s.StartCheck), int64(s.StartCheckEnd), int64(s.StopCheck), int64(s.StartInterval), int64(s.OpTimeout)} {
		if d < 0 {
			t.Fatalf("negative duration in %+v", s)
		}
	}
	if s.AutoType < proc.AutoPeriodic || s.AutoType > proc.AutoOneShot {
		t.Fatalf("auto type %v", s.AutoType)
	}
	if s.StartCheckEnd != 0 && s.StartCheckEnd < s.StartCheck {
		t.Fatalf("start check ends before it begins: %+v", s)
	}
	switch s.ShellExt {
	case "", proc.ShellSh, proc.ShellBat, proc.ShellPS1:
	default:
		t.Fatalf("shell ext %q", s.ShellExt)
	}
	for _, c := range s.ConfigMap {
		if !isAbsPath(c.Path) || hasControl(c.MD5) || c.MD5 != strings.ToLower(c.MD5) {
			t.Fatalf("configmap %+v", c)
		}
	}
}

func FuzzDecodeQueries(f *testing.F) {
	for _, body := range []string{
		`{"task_id":"GSETASK:20180315180551:1000"}`,
		`{"bk_biz_id":1,"bk_gse_taskid":"GSETASK:1"}`,
		`{"meta":{"namespace":"gse","name":"proc-test"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":1,"bk_supplier_id":2}]}`,
		`{"meta":{"namespace":"gse"},"page":{"start":0,"limit":1000}}`,
		`{"meta":{"namespace":"gse","name":"p"}}`,
	} {
		for kind := byte(0); kind < 3; kind++ {
			f.Add(kind, []byte(body))
		}
	}
	f.Fuzz(func(t *testing.T, kind byte, body []byte) {
		var err error
		switch kind % 3 {
		case 0:
			var q *ResultQuery
			if q, err = DecodeResultQuery(body); err == nil && (ValidTaskID(q.TaskID) != nil) {
				t.Fatalf("task id %q", q.TaskID)
			}
		case 1:
			var q *StatusQuery
			if q, err = DecodeStatusQuery(body); err == nil && (q.Namespace == "" || q.Name == "" || len(q.Targets) == 0) {
				t.Fatalf("status query %+v", q)
			}
		case 2:
			var q *SyncQuery
			if q, err = DecodeSyncQuery(body); err == nil && (q.Namespace == "" || q.Start < 0 || q.Limit < 1 || q.Limit > MaxSyncLimit) {
				t.Fatalf("sync query %+v", q)
			}
		}
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("error is not a FieldError: %#v", err)
			}
		}
	})
}
