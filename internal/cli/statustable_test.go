package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/proc"
)

func TestStatusTable(t *testing.T) {
	item := func(ip string) proc.Item {
		return proc.Item{Target: proc.Target{IP: ip}, Process: proc.ProcessID{Namespace: "web", Name: "svc"}}
	}
	task := &gseapi.Task{API: gseapi.APIOperateProcess, Op: proc.OpStatus, Items: []proc.Item{item("10.0.0.2"), item("10.0.0.1"), item("10.0.0.3")}}
	res := map[string]proc.HostResult{
		"0:0:10.0.0.1:web:svc": {Code: 0, Message: "success", Content: `{"ip":"10.0.0.1","timezone":8,"process":[{"procname":"svc","instance":[` +
			`{"pid":4242,"cpuUsage":12.345,"phyMemUsage":0.0049,"elapsedTime":93784,"isAuto":true,"version":"1.4.2","threadCount":7,` +
			`"cmdline":"/data/app/svc --port 80","report_time":1795400000,"startTime":"1795306216","health":"1"}]}]}`},
		"0:0:10.0.0.2:web:svc": {Code: 829, Message: "process(svc) is not running", Content: `{"process":[{"procname":"svc","instance":[` +
			`{"pid":-1,"isAuto":false,"report_time":1795400000}]}]}`},
		"0:0:10.0.0.3:web:svc": {Code: 117, Message: "host unreachable: dial tcp 10.0.0.3:22: connect: connection refused"},
	}
	var out bytes.Buffer
	if err := printRecap(&out, task, res, "table"); err != nil {
		t.Fatal(err)
	}
	rows := fieldsOf(out.String())
	want := [][]string{
		{"HOST", "CODE", "PID", "UPTIME", "CPU%", "MEM%", "MANAGED", "VERSION", "MESSAGE"},
		{"0:10.0.0.1", "0", "4242", "1d2h", "12.3", "0.0049", "yes", "1.4.2", "success"},
		{"0:10.0.0.2", "829", "-", "-", "-", "-", "no", "-", "process(svc)", "is", "not", "running"},
		{"0:10.0.0.3", "117", "-", "-", "-", "-", "-", "-", "host", "unreachable:"},
	}
	for i, w := range want {
		if len(rows) <= i || strings.Join(rows[i][:len(w)], " ") != strings.Join(w, " ") {
			t.Fatalf("row %d: want %v\n%s", i, w, out.String())
		}
	}
	if !strings.Contains(out.String(), "3 hosts: 1 success (0), 1 host unreachable (117), 1 ") {
		t.Fatalf("no counts:\n%s", out.String())
	}

	out.Reset()
	if err := printRecap(&out, task, res, "wide"); err != nil {
		t.Fatal(err)
	}
	rows = fieldsOf(out.String())
	head := strings.Join(rows[0], " ")
	if head != "HOST CODE PID UPTIME CPU% MEM% MANAGED VERSION STARTED THREADS MESSAGE CMDLINE" {
		t.Fatalf("wide header: %s", head)
	}
	// Started is report_time less the elapsed time, in UTC.
	if got := strings.Join(rows[1][8:], " "); got != "2026-11-22T00:10:16Z 7 success /data/app/svc --port 80" {
		t.Fatalf("wide row: %q\n%s", got, out.String())
	}
}

func fieldsOf(s string) [][]string {
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, strings.Fields(l))
	}
	return out
}

func TestUptimeAndPercent(t *testing.T) {
	for secs, want := range map[int64]string{0: "0s", 59: "59s", 61: "1m1s", 3600: "1h0m", 86400*3 + 7200: "3d2h"} {
		if got := uptime(secs); got != want {
			t.Errorf("uptime(%d) = %s, want %s", secs, got, want)
		}
	}
	for f, want := range map[float64]string{0: "0", 0.00123: "0.0012", 0.5: "0.50", 55.55: "55.5"} {
		if got := percent(f); got != want {
			t.Errorf("percent(%v) = %s, want %s", f, got, want)
		}
	}
	if got := hostOfKey("2:0:fe80::1:web:svc"); got != "2:fe80::1" {
		t.Errorf("hostOfKey of an IPv6 key: %s", got)
	}
}
