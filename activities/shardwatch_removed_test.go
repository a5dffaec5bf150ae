package activities

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
)

// TestShardWatchPausesRemovedHost: a member host a reload took out of the
// inventory is not polled; its host workflow is told once, through the
// failure path, not at each of its arms while the host stays away; once the
// host is back in the inventory it is polled again, with no word to the host
// workflow of a process that is fine.
func TestShardWatchPausesRemovedHost(t *testing.T) {
	live := watchEntry(t, t.TempDir(), "proc-removed")
	both, err := inventory.New("", inventory.Host{User: "root"}, nil, []inventory.Host{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}})
	must(t, err)
	one, err := inventory.New("", inventory.Host{User: "root"}, nil, []inventory.Host{{IP: "10.0.0.1"}})
	must(t, err)
	inv := &inventory.Inventory{}
	inv.Replace(one)
	const member = "host:0:10.0.0.2"
	input := &WatchInput{Target: proc.Target{IP: "10.0.0.2"}, Entries: []WatchEntry{live}, Interval: 100 * time.Millisecond}
	hosts := newFakeHosts(map[string]HostWatch{member: {Gen: 1, Input: input}})
	runner := &countingRunner{execs: map[string]int{}}
	a := &Activities{Inventory: inv, Runner: runner, Hosts: hosts}
	in := ShardWatchInput{Shard: "s", Epoch: 1, Renew: time.Second, Members: []ShardMember{{Host: member, Gen: 1}}}
	must(t, a.ShardWatch(context.Background(), in))
	r := hosts.reported[member]
	if len(r) != 1 || r[0].Gen != 1 || !strings.Contains(r[0].Failed, "host 0:10.0.0.2 was removed from the inventory") {
		t.Fatalf("reports of the removed host: %+v", r)
	}
	if n := runner.count("10.0.0.2"); n != 0 {
		t.Fatalf("the removed host was polled %d times", n)
	}

	// The host workflow arms again after its pause: still away, it hears
	// nothing more, and is not polled.
	hosts.watches[member] = HostWatch{Gen: 2, Input: input}
	in.Epoch, in.Members[0].Gen = 2, 2
	must(t, a.ShardWatch(context.Background(), in))
	if r := hosts.reported[member]; len(r) != 1 || runner.count("10.0.0.2") != 0 {
		t.Fatalf("while still removed: reports %+v, polls %d", r, runner.count("10.0.0.2"))
	}

	// Back in the inventory during a watch: polled from its next interval.
	in.Epoch = 3
	go func() {
		time.Sleep(300 * time.Millisecond)
		inv.Replace(both)
	}()
	must(t, a.ShardWatch(context.Background(), in))
	if n := runner.count("10.0.0.2"); n < 3 {
		t.Fatalf("the host back in the inventory was polled %d times in 0.7 s at 100 ms", n)
	}
	if r := hosts.reported[member]; len(r) != 1 {
		t.Fatalf("a host back with its process running was reported: %+v", r)
	}
}
