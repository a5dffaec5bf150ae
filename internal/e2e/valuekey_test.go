package e2e

import (
	"strings"
	"testing"

	"github.com/drover-sh/drover/proc"
)

// The job platform's operate_proc v2 names a process by value_key
// setup_path/proc_name. It starts on the host under that key, and an
// operator then reads it with --name and ps.
func TestValueKeyThatIsAPathEndToEnd(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	e.startWorker()
	body := `{"bk_app_code":"job","bk_username":"admin","bk_biz_id":7,"op_type":0,"process_infos":[{` +
		`"ip_list":[{"ip":"` + h.IP + `","bk_cloud_id":0}],"proc_name":"svc","setup_path":"/data/app","pid_path":"/data/app/svc.pid",` +
		`"start_cmd":"./start.sh","stop_cmd":"./stop.sh","value_key":"/data/app/svc","start_check_begin_time":1,"op_timeout":20}]}`
	out, errOut, code := e.starter(body, "api", "operate_proc_v2", "--wait")
	k := key(h.IP, "7", "/data/app/svc")
	if r := decodeResult(t, out); code != 0 || r.Data[k].ErrorCode != 0 {
		t.Fatalf("operate_proc_v2 with value_key /data/app/svc: exit %d, want key %s to succeed\n%s%s", code, k, out, errOut)
	}
	out, errOut, code = e.starter("", "status", "--namespace", "7", "--name", "/data/app/svc", "--hosts", "all", "-o", "json")
	if r := decodeRows(t, out)[k]; code != 0 || r.Code != int(proc.CodeSuccess) {
		t.Fatalf("status --name /data/app/svc: exit %d %+v\n%s", code, r, errOut)
	}
	if out, _, _ := e.starter("", "ps", "--namespace", "7"); !strings.Contains(out, "7//data/app/svc") || !strings.Contains(out, "running") {
		t.Fatalf("ps:\n%s", out)
	}
}
