package dispatch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestHealthGateLoop: the gate probes at once and then every interval up
// to min_healthy; a host found dead or unhealthy once fails and is not
// probed again.
func TestHealthGateLoop(t *testing.T) {
	healthy := `{"process":[{"procname":"p","instance":[{"health":"1"}]}]}`
	probes := 0
	var asked [][]string
	probe := func(_ context.Context, items []proc.Item) ([]workflows.HostReply, error) {
		probes++
		var ips []string
		out := make([]workflows.HostReply, len(items))
		for i, it := range items {
			ips = append(ips, it.Target.IP)
			r := proc.HostResult{Code: proc.CodeSuccess, Content: healthy}
			switch {
			case it.Target.IP == "10.0.0.2" && probes >= 3:
				r = proc.HostResult{Code: proc.CodeNotRunning, Message: "process(p) is not running"}
			case it.Target.IP == "10.0.0.3":
				r.Content = `{"process":[{"procname":"p","instance":[{"health":"0"}]}]}`
			}
			out[i] = workflows.HostReply{Index: i, Result: r}
		}
		asked = append(asked, ips)
		return out, nil
	}
	var slept time.Duration
	sleep := func(_ context.Context, d time.Duration) error { slept += d; return nil }
	got, err := healthGate(context.Background(), workflows.HealthGateInput{Items: rolloutItems(3), MinHealthy: 12 * time.Second, Every: 5 * time.Second}, probe, sleep)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[{2 health_cmd failed} {1 status answered 829 (process(p) is not running)}]" {
		t.Fatalf("failures %v", got)
	}
	// Checks at 0, 5, 10 and 12 s; the unhealthy host only the first time.
	if slept != 12*time.Second || fmt.Sprint(asked) != "[[10.0.0.1 10.0.0.2 10.0.0.3] [10.0.0.1 10.0.0.2] [10.0.0.1 10.0.0.2] [10.0.0.1]]" {
		t.Fatalf("slept %s, probes %v", slept, asked)
	}
}

func rolloutItems(n int) []proc.Item {
	items := make([]proc.Item, n)
	for i := range items {
		items[i] = proc.Item{Target: proc.Target{IP: fmt.Sprintf("10.0.0.%d", i+1)}, Process: proc.ProcessID{Namespace: "ns", Name: "p"}}
	}
	return items
}
