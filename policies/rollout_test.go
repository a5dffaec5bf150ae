package policies

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Size
		err  string
	}{
		{"5", Size{Count: 5}, ""},
		{"0", Size{}, ""},
		{"10%", Size{Percent: 10}, ""},
		{" 2.5% ", Size{Percent: 2.5}, ""},
		{"100%", Size{Percent: 100}, ""},
		{"101%", Size{}, `--batch "101%": a percentage must be a number from 0 to 100 followed by %`},
		{"-1", Size{}, `--batch "-1": must be a count of hosts (0 or more) or a percentage like 10%`},
		{"x%", Size{}, `--batch "x%": a percentage must be a number from 0 to 100 followed by %`},
		{"ten", Size{}, `--batch "ten": must be a count of hosts (0 or more) or a percentage like 10%`},
	} {
		got, err := ParseSize("--batch", c.in)
		if fmt.Sprint(err) != c.err && !(err == nil && c.err == "") || got != c.want {
			t.Errorf("ParseSize(%q) = %+v, %v; want %+v, %q", c.in, got, err, c.want, c.err)
		}
	}
}

func TestSizeJSON(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Size
		ok   bool
	}{
		{`5`, Size{Count: 5}, true},
		{`"5"`, Size{Count: 5}, true},
		{`"10%"`, Size{Percent: 10}, true},
		{`{"percent":2}`, Size{Percent: 2}, true},
		{`-3`, Size{}, false},
		{`1.5`, Size{}, false},
		{`"lots"`, Size{}, false},
		{`true`, Size{}, false},
	} {
		var s Size
		err := json.Unmarshal([]byte(c.in), &s)
		if (err == nil) != c.ok || (c.ok && s != c.want) {
			t.Errorf("unmarshal %s = %+v, %v; want %+v ok=%v", c.in, s, err, c.want, c.ok)
		}
	}
}

func TestBatches(t *testing.T) {
	for _, c := range []struct {
		total int
		r     Rollout
		want  string
	}{
		{20, Rollout{Canary: 1, Batch: Size{Count: 5}}, "[1 5 5 5 4]"},
		{20, Rollout{Batch: Size{Count: 5}}, "[5 5 5 5]"},
		{20, Rollout{Canary: 1}, "[1 19]"},
		{20, Rollout{}, "[20]"},
		{5, Rollout{Batch: Size{Percent: 10}}, "[1 1 1 1 1]"}, // 10% of 5 rounds up to 1
		{100, Rollout{Canary: 2, Batch: Size{Percent: 25}}, "[2 25 25 25 23]"},
		{3, Rollout{Canary: 5, Batch: Size{Count: 2}}, "[3]"}, // a canary larger than the op is all of it
		{0, Rollout{Canary: 1, Batch: Size{Count: 2}}, "[]"},
		{7, Rollout{Batch: Size{Count: 100}}, "[7]"},
	} {
		if got := fmt.Sprint(Batches(c.total, c.r)); got != c.want {
			t.Errorf("Batches(%d, %+v) = %s, want %s", c.total, c.r, got, c.want)
		}
	}
}

func TestOverBudget(t *testing.T) {
	for _, c := range []struct {
		failed, total int
		max           Size
		want          bool
	}{
		{0, 20, Size{}, false},
		{1, 20, Size{}, true}, // zero tolerates no failure
		{2, 20, Size{Count: 2}, false},
		{3, 20, Size{Count: 2}, true},
		{1, 100, Size{Percent: 2}, false},
		{2, 100, Size{Percent: 2}, false},
		{3, 100, Size{Percent: 2}, true},
		{1, 20, Size{Percent: 2}, true}, // 1 of 20 is 5%, past 2%
		{20, 20, Size{Percent: 100}, false},
	} {
		if got := OverBudget(c.failed, c.total, c.max); got != c.want {
			t.Errorf("OverBudget(%d, %d, %s) = %v, want %v", c.failed, c.total, c.max, got, c.want)
		}
	}
}

func TestAfterBatch(t *testing.T) {
	canary := Rollout{Canary: 1, Batch: Size{Count: 5}, MaxFail: Size{Count: 2}, ApproveAfterCanary: true, Pause: 10 * time.Second}
	plain := Rollout{Batch: Size{Count: 5}, MaxFail: Size{Count: 2}}
	for _, c := range []struct {
		name                    string
		r                       Rollout
		batch, n, failed, total int
		want                    After
	}{
		{"canary passed: wait for approval and the pause", canary, 0, 5, 0, 20, After{WaitForApproval: true, Pause: 10 * time.Second}},
		{"later batch: only the pause", canary, 1, 5, 1, 20, After{Pause: 10 * time.Second}},
		{"budget crossed after a batch: stop", canary, 2, 5, 3, 20, After{Stop: true}},
		{"a failed canary is not waiting for approval", Rollout{Canary: 1, ApproveAfterCanary: true}, 0, 2, 1, 20, After{Stop: true}},
		{"last batch: done", canary, 4, 5, 2, 20, After{Done: true}},
		{"last batch over budget: stop wins", canary, 4, 5, 3, 20, After{Stop: true}},
		{"no canary, no pause: go on", plain, 0, 4, 2, 20, After{}},
		{"canary without approval: go on", Rollout{Canary: 1}, 0, 2, 0, 20, After{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := AfterBatch(c.r, c.batch, c.n, c.failed, c.total); got != c.want {
				t.Fatalf("AfterBatch = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestRolloutValidate(t *testing.T) {
	for _, c := range []struct {
		r   Rollout
		err string
	}{
		{Rollout{Canary: 1, Batch: Size{Percent: 10}, MaxFail: Size{Percent: 2}, MinHealthy: 30 * time.Second, ApproveAfterCanary: true}, ""},
		{Rollout{}, ""},
		{Rollout{Canary: -1}, "rollout.canary -1: must be 0 or more"},
		{Rollout{Batch: Size{Percent: 150}}, "rollout.batch 150%: must be a count of hosts or a percentage up to 100%"},
		{Rollout{MaxFail: Size{Count: -2}}, "rollout.max_fail -2: must be a count of hosts or a percentage up to 100%"},
		{Rollout{MinHealthy: -time.Second}, "rollout.min_healthy -1s: must be from 0 to 24h0m0s"},
		{Rollout{Pause: 25 * time.Hour}, "rollout.pause 25h0m0s: must be from 0 to 24h0m0s"},
		{Rollout{ApproveAfterCanary: true}, "rollout.approve_after_canary: needs a canary of 1 host or more"},
	} {
		err := c.r.Validate("rollout.")
		if (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("Validate(%+v) = %v, want %q", c.r, err, c.err)
		}
	}
}

func TestHealthCheckEvery(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		0: time.Second, 3 * time.Second: time.Second, 12 * time.Second: 2 * time.Second, 30 * time.Second: 5 * time.Second, time.Hour: 5 * time.Second,
	} {
		if got := HealthCheckEvery(in); got != want {
			t.Errorf("HealthCheckEvery(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestRolloutValidateFor(t *testing.T) {
	ok := Rollout{Batch: Size{Count: 20}}
	if err := ok.ValidateFor("rollout.", 10000); err != nil {
		t.Fatal(err)
	}
	if err := (Rollout{Batch: Size{Count: 1}}).ValidateFor("rollout.", MaxRolloutBatches); err != nil {
		t.Fatal(err)
	}
	err := (Rollout{Batch: Size{Count: 1}}).ValidateFor("rollout.", MaxRolloutBatches+1)
	if err == nil || err.Error() != "rollout.batch 1: 501 hosts make 501 batches; at most 500 (give a larger batch or a percentage)" {
		t.Fatalf("too many batches: %v", err)
	}
	if err := (Rollout{Canary: -1}).ValidateFor("rollout.", 5); err == nil {
		t.Fatal("ValidateFor skips Validate's rules")
	}
}
