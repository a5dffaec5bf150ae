package gseapi

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
)

// seedExample is seed 000's request example, verbatim.
const seedExample = `{
  "meta": {
	"namespace": "gse",
    "name": "proc-test",
    "labels": {
        "proc_name": "proc-test"
    }
  },
  "op_type": 0,
  "hosts": [
    {
      "ip": "10.0.0.1",
      "bk_cloud_id": 1,
      "bk_supplier_id": 2
    }
  ]
}`

func TestDecodeSeedExample(t *testing.T) {
	r, err := DecodeOperateProcess([]byte(seedExample))
	if err != nil {
		t.Fatal(err)
	}
	op, items := r.Items()
	if op != proc.OpStart || len(items) != 1 {
		t.Fatalf("op %v items %d", op, len(items))
	}
	it := items[0]
	if it.Key() != "1:2:10.0.0.1:gse:proc-test" {
		t.Fatalf("key %q", it.Key())
	}
	// operate_process acts on the spec registered for meta on each host.
	if it.Spec != nil {
		t.Fatalf("spec %+v, want nil", it.Spec)
	}
}

func TestDecodeCallerFieldsAccepted(t *testing.T) {
	body := `{"bk_app_code":"esb_test","bk_app_secret":"s3cret","bk_username":"admin",` + seedExample[1:]
	r, err := DecodeOperateProcess([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.AppCode != "esb_test" || r.Username != "admin" {
		t.Fatalf("caller %+v", r.Caller)
	}
}

func TestUnknownOpTypeIsAccepted(t *testing.T) {
	// Unknown op_types are answered per host with 832, not refused whole.
	body := strings.Replace(seedExample, `"op_type": 0`, `"op_type": 5`, 1)
	r, err := DecodeOperateProcess([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if op, _ := r.Items(); op.Valid() {
		t.Fatalf("op %v should be invalid", op)
	}
}

func TestDecodeRejects(t *testing.T) {
	host := `{"ip":"10.0.0.1","bk_cloud_id":0,"bk_supplier_id":0}`
	meta := `"meta":{"namespace":"gse","name":"p"}`
	cases := []struct {
		name, body, field string
	}{
		{"empty body", ``, "(body)"},
		{"not json", `{"meta":`, "(body)"},
		{"trailing data", `{} {}`, "(body)"},
		{"invalid utf8", "{\"meta\":{\"namespace\":\"\xff\"}}", "(body)"},
		{"meta missing", `{"hosts":[` + host + `],"op_type":2}`, "meta.namespace"},
		{"name missing", `{"meta":{"namespace":"gse"},"hosts":[` + host + `],"op_type":2}`, "meta.name"},
		{"name with colon", `{"meta":{"namespace":"gse","name":"a:b"},"hosts":[` + host + `],"op_type":2}`, "meta.name"},
		{"namespace with slash", `{"meta":{"namespace":"../etc","name":"p"},"hosts":[` + host + `],"op_type":2}`, "meta.namespace"},
		{"namespace dotdot", `{"meta":{"namespace":"..","name":"p"},"hosts":[` + host + `],"op_type":2}`, "meta.namespace"},
		{"name with newline", `{"meta":{"namespace":"gse","name":"a\nb"},"hosts":[` + host + `],"op_type":2}`, "meta.name"},
		{"name too long", `{"meta":{"namespace":"gse","name":"` + strings.Repeat("x", MaxProcessNameBytes+1) + `"},"hosts":[` + host + `],"op_type":2}`, "meta.name"},
		{"label an object", `{"meta":{"namespace":"gse","name":"p","labels":{"a":{}}},"hosts":[` + host + `],"op_type":2}`, "meta.labels.a"},
		{"label an array", `{"meta":{"namespace":"gse","name":"p","labels":{"a":[1]}},"hosts":[` + host + `],"op_type":2}`, "meta.labels.a"},
		{"agent_id_list empty", `{` + meta + `,"agent_id_list":[],"op_type":2}`, "agent_id_list"},
		{"agent id too long", `{` + meta + `,"agent_id_list":["` + strings.Repeat("a", 65) + `"],"op_type":2}`, "agent_id_list[0]"},
		{"agent id empty", `{` + meta + `,"agent_id_list":["0:10.0.0.1",""],"op_type":2}`, "agent_id_list[1]"},
		{"agent id with a space", `{` + meta + `,"agent_id_list":["a b"],"op_type":2}`, "agent_id_list[0]"},
		{"agent id twice", `{` + meta + `,"agent_id_list":["abc","abc"],"op_type":2}`, "agent_id_list[1]"},
		{"agent_id_list a string", `{` + meta + `,"agent_id_list":"abc","op_type":2}`, "agent_id_list"},
		{"hosts missing", `{` + meta + `,"op_type":2}`, "hosts"},
		{"hosts empty", `{` + meta + `,"hosts":[],"op_type":2}`, "hosts"},
		{"hosts not array", `{` + meta + `,"hosts":{},"op_type":2}`, "hosts"},
		{"ip missing", `{` + meta + `,"hosts":[{"bk_cloud_id":0,"bk_supplier_id":0}],"op_type":2}`, "hosts[0].ip"},
		{"ip bad", `{` + meta + `,"hosts":[{"ip":"10.0.0.300","bk_cloud_id":0,"bk_supplier_id":0}],"op_type":2}`, "hosts[0].ip"},
		{"cloud missing", `{` + meta + `,"hosts":[{"ip":"10.0.0.1","bk_supplier_id":0}],"op_type":2}`, "hosts[0].bk_cloud_id"},
		{"cloud negative", `{` + meta + `,"hosts":[{"ip":"10.0.0.1","bk_cloud_id":-1,"bk_supplier_id":0}],"op_type":2}`, "hosts[0].bk_cloud_id"},
		{"cloud string", `{` + meta + `,"hosts":[{"ip":"10.0.0.1","bk_cloud_id":"0","bk_supplier_id":0}],"op_type":2}`, "hosts[0].bk_cloud_id"},
		{"supplier negative", `{` + meta + `,"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0,"bk_supplier_id":-1}],"op_type":2}`, "hosts[0].bk_supplier_id"},
		{"duplicate host", `{` + meta + `,"hosts":[` + host + `,` + host + `],"op_type":2}`, "hosts[1]"},
		{"op_type missing", `{` + meta + `,"hosts":[` + host + `]}`, "op_type"},
		{"op_type string", `{` + meta + `,"hosts":[` + host + `],"op_type":"2"}`, "op_type"},
		{"op_type float", `{` + meta + `,"hosts":[` + host + `],"op_type":2.5}`, "op_type"},
	}
	for _, c := range cases {
		_, err := DecodeOperateProcess([]byte(c.body))
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

func TestBodyLimit(t *testing.T) {
	big := make([]byte, MaxBodyBytes+1)
	_, err := DecodeOperateProcess(big)
	var fe *FieldError
	if !errors.As(err, &fe) || !strings.Contains(fe.Rule, "limit") {
		t.Fatalf("oversized body: %v", err)
	}
}

func TestTaskID(t *testing.T) {
	id := NewTaskID(time.Date(2026, 11, 22, 3, 4, 5, 0, time.UTC))
	if !regexp.MustCompile(`^GSETASK:20261122030405:\d{12}$`).MatchString(id) {
		t.Fatalf("task id %q", id)
	}
	now := time.Now()
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := NewTaskID(now)
		if seen[id] {
			t.Fatalf("task id %s issued twice in the same second", id)
		}
		seen[id] = true
	}
	if ValidTaskID(id) != nil || ValidTaskID("nope") == nil {
		t.Fatal("ValidTaskID")
	}
}

func TestSeedFileExampleDecodes(t *testing.T) {
	// The repository's copy of the seed example is the constant above,
	// byte for byte, and decodes as it does.
	raw := exampleOf(t, "operate_process.json")
	if strings.TrimSpace(string(raw)) != seedExample {
		t.Fatalf("seed example file differs from seedExample:\n%s", raw)
	}
	if _, err := DecodeOperateProcess(raw); err != nil {
		t.Fatalf("seed example: %v", err)
	}
}
