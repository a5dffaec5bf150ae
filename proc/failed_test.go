package proc

import "testing"

func TestFailedIsDoneAndNotSuccess(t *testing.T) {
	for _, tc := range []struct {
		code         Code
		done, failed bool
	}{
		{CodeSuccess, true, false},
		{CodeRunning, false, false},
		{CodeNotRunning, true, true},
		{CodeTimeout, true, true},
		{CodeCancelled, true, true},
	} {
		r := HostResult{Code: tc.code}
		if r.Done() != tc.done || r.Failed() != tc.failed {
			t.Errorf("%d: done %v failed %v, want %v %v", tc.code, r.Done(), r.Failed(), tc.done, tc.failed)
		}
	}
	results := []KeyedResult{{HostResult: HostResult{Code: CodeSuccess}}, {HostResult: Pending()}, {HostResult: HostResult{Code: CodeNotRunning}}}
	if n := CountFailed(results); n != 1 {
		t.Fatalf("CountFailed = %d, want 1", n)
	}
}
