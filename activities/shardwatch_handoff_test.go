package activities

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// TestShardWatchTakesWhatItsWorkerArmed: a generation a host armed on the
// watch's own worker is watched without asking the host workflow, once;
// one of another generation, older or newer, is not taken for it; a
// disarm there ends the watch of every generation up to it.
func TestShardWatchTakesWhatItsWorkerArmed(t *testing.T) {
	dir := t.TempDir()
	deadPid := filepath.Join(dir, "gone.pid")
	must(t, os.WriteFile(deadPid, []byte("999999\n"), 0o644))
	gone := WatchInput{Target: proc.Target{IP: "10.0.0.2"}, Interval: 100 * time.Millisecond, Entries: []WatchEntry{{
		Process: proc.ProcessID{Namespace: "t", Name: "gone"},
		Spec:    policies.WithDefaults(proc.Spec{ProcName: "gone", SetupPath: dir, PidPath: deadPid, AutoType: proc.AutoResident})}}}
	inv, err := inventory.New("", inventory.Host{User: "root"}, nil, []inventory.Host{{IP: "10.0.0.2"}})
	must(t, err)
	const member = "host:0:10.0.0.2"
	hosts := newFakeHosts(map[string]HostWatch{})
	runner := &countingRunner{execs: map[string]int{}}
	a := &Activities{Inventory: inv, Runner: runner, Hosts: hosts}
	epoch := 0
	watch := func(gen int) []ShardEvents {
		t.Helper()
		epoch++
		in := ShardWatchInput{Shard: "s", Epoch: epoch, Renew: 500 * time.Millisecond, Members: []ShardMember{{Host: member, Gen: gen}}}
		if err := a.ShardWatch(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		return hosts.reported[member]
	}

	// The host workflow would answer nothing armed: only the hand-off can
	// have made the watch poll the host and find its process dead.
	HandOffWatch(a, member, 5, gone)
	if r := watch(5); hosts.queries[member] != 0 || len(r) != 1 || r[0].Gen != 5 || len(r[0].Events) != 1 || r[0].Events[0].Kind != WatchDead {
		t.Fatalf("generation 5 handed off: %d queries, reports %+v", hosts.queries[member], r)
	}

	// An older generation's hand-off is not taken for 6: the host is asked.
	HandOffWatch(a, member, 4, gone)
	hosts.watches[member] = HostWatch{Gen: 6, Input: &gone}
	if r := watch(6); hosts.queries[member] != 1 || len(r) != 2 || r[1].Gen != 6 {
		t.Fatalf("generation 6 with 4 handed off: %d queries, reports %+v", hosts.queries[member], r)
	}

	// A newer one waits for its own membership, and is then taken.
	HandOffWatch(a, member, 8, gone)
	hosts.watches[member] = HostWatch{Gen: 7, Input: &gone}
	if r := watch(7); hosts.queries[member] != 2 || len(r) != 3 || r[2].Gen != 7 {
		t.Fatalf("generation 7 with 8 handed off: %d queries, reports %+v", hosts.queries[member], r)
	}
	if r := watch(8); hosts.queries[member] != 2 || len(r) != 4 || r[3].Gen != 8 {
		t.Fatalf("generation 8 handed off: %d queries, reports %+v", hosts.queries[member], r)
	}

	// A disarm on the worker ends the generations before it there: the
	// watch of 9 asks nothing, polls nothing and reports nothing. The
	// next generation, armed on another worker, is asked for and watched.
	HandOffWatch(a, member, 9, gone)
	EndWatch(a, member, 9)
	polls := runner.count("10.0.0.2")
	if r := watch(9); hosts.queries[member] != 2 || len(r) != 4 || runner.count("10.0.0.2") != polls {
		t.Fatalf("generation 9 disarmed: %d queries, %d polls, reports %+v", hosts.queries[member], runner.count("10.0.0.2")-polls, r)
	}
	hosts.watches[member] = HostWatch{Gen: 10, Input: &gone}
	if r := watch(10); hosts.queries[member] != 3 || len(r) != 5 || r[4].Gen != 10 {
		t.Fatalf("generation 10 after the disarm: %d queries, reports %+v", hosts.queries[member], r)
	}
}

// TestShardWatchStopsAtADisarmOnItsWorker: a host disarms on the watch's
// worker (a stop unmanages its process), then the process ends. The
// running watch polls the host no more and reports nothing: the host
// would refuse the report as stale.
func TestShardWatchStopsAtADisarmOnItsWorker(t *testing.T) {
	dir := t.TempDir()
	live := watchEntry(t, dir, "proc-stopped")
	inv, err := inventory.New("", inventory.Host{User: "root"}, nil, []inventory.Host{{IP: "10.0.0.1"}})
	must(t, err)
	const member = "host:0:10.0.0.1"
	hosts := newFakeHosts(map[string]HostWatch{})
	runner := &countingRunner{execs: map[string]int{}}
	a := &Activities{Inventory: inv, Runner: runner, Hosts: hosts}
	HandOffWatch(a, member, 3, WatchInput{Target: proc.Target{IP: "10.0.0.1"}, Entries: []WatchEntry{live}, Interval: 100 * time.Millisecond})
	done := make(chan error, 1)
	go func() {
		done <- a.ShardWatch(context.Background(), ShardWatchInput{Shard: "s", Epoch: 1, Renew: 2 * time.Second,
			Members: []ShardMember{{Host: member, Gen: 3}}})
	}()
	for runner.count("10.0.0.1") < 2 {
		time.Sleep(20 * time.Millisecond)
	}
	EndWatch(a, member, 3)
	must(t, os.Remove(live.Spec.PidPath))
	polled := runner.count("10.0.0.1")
	must(t, <-done)
	// A poll already under way at the disarm may end; none begins after.
	if n := runner.count("10.0.0.1") - polled; n > 1 || len(hosts.reported[member]) != 0 || hosts.queries[member] != 0 {
		t.Fatalf("after the disarm: %d more polls, reports %+v, %d queries", n, hosts.reported[member], hosts.queries[member])
	}
}
