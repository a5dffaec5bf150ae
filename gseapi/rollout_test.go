package gseapi

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

func TestDecodeRollout(t *testing.T) {
	entry := func(op int) string {
		return `{"meta":{"namespace":"web","name":"svc"},"op_type":` + string(rune('0'+op)) +
			`,"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0},{"ip":"10.0.0.2","bk_cloud_id":0}]}`
	}
	body := func(op int, rollout string) string {
		b := `{"bk_app_code":"ops","proc_operate_req":[` + entry(op) + `]`
		if rollout != "" {
			b += `,"rollout":` + rollout
		}
		return b + `}`
	}
	t.Run("accepted", func(t *testing.T) {
		task, r, err := DecodeRollout([]byte(body(7, `{"canary":1,"batch":"50%","max_fail":"2","min_healthy":30,"pause":5,"approve_after_canary":true}`)))
		if err != nil {
			t.Fatal(err)
		}
		want := policies.Rollout{Canary: 1, Batch: policies.Size{Percent: 50}, MaxFail: policies.Size{Count: 2},
			MinHealthy: 30 * time.Second, Pause: 5 * time.Second, ApproveAfterCanary: true}
		if r != want || task.Op != proc.OpRestart || len(task.Items) != 2 || task.API != APIOperateProcMulti {
			t.Fatalf("rollout %+v, task op %v with %d items", r, task.Op, len(task.Items))
		}
	})
	for _, c := range []struct {
		name, body, want string
	}{
		{"no rollout object", body(0, ""), "rollout: is required here (without one, call operate_proc_multi)"},
		{"null rollout", body(0, "null"), "rollout: is required here"},
		{"bare array", `[` + entry(0) + `]`, "(body): must be an object"},
		{"percentage over 100", body(0, `{"batch":"150%"}`), "rollout"},
		{"negative count", body(0, `{"max_fail":-1}`), "rollout"},
		{"unknown field", body(0, `{"batchsize":5}`), `unknown field "batchsize"`},
		{"negative seconds", body(0, `{"min_healthy":-5}`), "min_healthy and pause are seconds, 0 or more"},
		{"approval without canary", body(0, `{"approve_after_canary":true}`), "approve_after_canary: needs a canary"},
		{"status cannot roll out", body(2, `{"batch":1}`), "proc_operate_req[0].op_type: 2 (status) cannot roll out"},
		{"a bad entry is named as by operate_proc_multi", `{"proc_operate_req":[{"meta":{"namespace":"web","name":"svc"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0}]}],"rollout":{"batch":1}}`, "proc_operate_req[0].op_type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := DecodeRollout([]byte(c.body))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}
