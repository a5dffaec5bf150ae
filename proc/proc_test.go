package proc

import "testing"

func TestResultKeyRoundTrip(t *testing.T) {
	tg := Target{CloudID: 1, SupplierID: 2, IP: "10.0.0.1"}
	p := ProcessID{Namespace: "gse", Name: "proc-test"}
	if got := ResultKey(tg, p); got != "1:2:10.0.0.1:gse:proc-test" {
		t.Fatalf("ResultKey = %q", got)
	}
	if got := ShortResultKey(tg, p); got != "1:10.0.0.1:gse:proc-test" {
		t.Fatalf("ShortResultKey = %q", got)
	}
	for _, key := range []string{"1:2:10.0.0.1:gse:proc-test", "1:10.0.0.1:gse:proc-test"} {
		gt, gp, err := ParseResultKey(key)
		if err != nil {
			t.Fatalf("ParseResultKey(%q): %v", key, err)
		}
		if gt.CloudID != 1 || gt.IP != "10.0.0.1" || gp != p {
			t.Fatalf("ParseResultKey(%q) = %+v %+v", key, gt, gp)
		}
	}
}

func TestParseResultKeyRejects(t *testing.T) {
	for _, key := range []string{"", "1:2:3", "x:2:10.0.0.1:gse:p", "1:y:10.0.0.1:gse:p", "1:2:3:4:5:6"} {
		if _, _, err := ParseResultKey(key); err == nil {
			t.Errorf("ParseResultKey(%q) accepted", key)
		}
	}
}

func TestOpTypeValid(t *testing.T) {
	valid := map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 7: true, 8: true, 9: true}
	for i := -1; i <= 12; i++ {
		if OpType(i).Valid() != valid[i] {
			t.Errorf("OpType(%d).Valid() = %v", i, !valid[i])
		}
	}
	if op, ok := ParseOpName("restart"); !ok || op != OpRestart {
		t.Fatalf("ParseOpName(restart) = %v %v", op, ok)
	}
}

func TestSpecIndex(t *testing.T) {
	cases := []struct {
		spec Spec
		want string
	}{
		{Spec{SetupPath: "/data/app", ProcName: "svc"}, "/data/app/svc"},
		{Spec{SetupPath: "/data/app/", ProcName: "svc"}, "/data/app/svc"},
		{Spec{SetupPath: "/", ProcName: "svc"}, "/svc"},
		{Spec{SetupPath: "/data/app", ProcName: "svc", ValueKey: "k1"}, "k1"},
	}
	for _, c := range cases {
		if got := c.spec.Index(); got != c.want {
			t.Errorf("%+v.Index() = %q, want %q", c.spec, got, c.want)
		}
	}
}
