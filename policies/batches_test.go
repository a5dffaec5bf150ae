package policies

import (
	"reflect"
	"testing"
	"time"

	"github.com/drover-sh/drover/proc"
)

func TestHostBatches(t *testing.T) {
	item := func(ip string) proc.Item { return proc.Item{Target: proc.Target{IP: ip}} }
	for _, tc := range []struct {
		name  string
		items []proc.Item
		size  int
		want  [][]int
	}{
		{"none", nil, 2, nil},
		{"one host per item", []proc.Item{item("a"), item("b"), item("c")}, 2, [][]int{{0, 1}, {2}}},
		{"a host's items stay together", []proc.Item{item("a"), item("b"), item("a"), item("c")}, 2, [][]int{{0, 2}, {1, 3}}},
		{"a host larger than a batch is one batch", []proc.Item{item("a"), item("a"), item("a"), item("b")}, 2, [][]int{{0, 1, 2}, {3}}},
		{"size below one is one", []proc.Item{item("a"), item("b")}, 0, [][]int{{0}, {1}}},
		{"cloud areas are hosts of their own", []proc.Item{item("a"), {Target: proc.Target{CloudID: 1, IP: "a"}}}, 1, [][]int{{0}, {1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HostBatches(tc.items, tc.size); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("HostBatches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeliverLimit(t *testing.T) {
	issued := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	long := proc.Spec{OpTimeout: time.Hour}
	items := []proc.Item{{Target: proc.Target{IP: "a"}}, {Target: proc.Target{IP: "b"}, Spec: &long}}
	for _, tc := range []struct {
		name      string
		op        proc.OpType
		items     []proc.Item
		deadlines []time.Time
		want      time.Duration
	}{
		{"no items: the grace", proc.OpStart, nil, nil, DeliverGrace},
		{"the latest end", proc.OpStart, items, []time.Time{issued.Add(10 * time.Minute), issued.Add(2 * time.Minute)},
			2*time.Minute + HostOpDeadline(proc.OpStart, WithDefaults(long)) + DeliverGrace},
		{"a late deadline with a short op", proc.OpStop, items[:1], []time.Time{issued.Add(10 * time.Minute)},
			10*time.Minute + HostOpDeadline(proc.OpStop, WithDefaults(proc.Spec{})) + DeliverGrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DeliverLimit(issued, tc.op, tc.items, tc.deadlines); got != tc.want {
				t.Fatalf("DeliverLimit = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestDeliverPerConnection(t *testing.T) {
	for _, c := range []struct{ sessions, want int }{
		{1, 2}, {8, 16}, {32, 64},
		{0, 2}, {-1, 2}, // never a bound that lets nothing through
	} {
		if got := DeliverPerConnection(c.sessions); got != c.want {
			t.Errorf("DeliverPerConnection(%d) = %d, want %d", c.sessions, got, c.want)
		}
	}
}
