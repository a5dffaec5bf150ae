package activities

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// fakeHosts answers watch-input queries from a table and records reports.
type fakeHosts struct {
	mu       sync.Mutex
	watches  map[string]HostWatch
	queries  map[string]int
	reported map[string][]ShardEvents
	// next is what a host answers after its first query.
	next map[string]HostWatch
}

// newFakeHosts answers watches, each host's armed watch; nothing is
// reported yet.
func newFakeHosts(watches map[string]HostWatch) *fakeHosts {
	return &fakeHosts{queries: map[string]int{}, reported: map[string][]ShardEvents{}, watches: watches}
}

func (f *fakeHosts) WatchInput(_ context.Context, host string) (HostWatch, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries[host]++
	w, ok := f.watches[host]
	if next, ok := f.next[host]; ok {
		f.watches[host] = next
		delete(f.next, host)
	}
	return w, ok, nil
}

func (f *fakeHosts) Report(_ context.Context, host string, ev ShardEvents) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reported[host] = append(f.reported[host], ev)
	return true, nil
}

// countingRunner runs scripts locally and counts them per host.
type countingRunner struct {
	localRunner
	mu    sync.Mutex
	execs map[string]int
}

func (c *countingRunner) Run(ctx context.Context, h inventory.Host, cmd transport.Command) (transport.Result, error) {
	c.mu.Lock()
	c.execs[h.IP]++
	c.mu.Unlock()
	return c.localRunner.Run(ctx, h, cmd)
}

func (c *countingRunner) count(ip string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.execs[ip]
}

// TestShardWatchPollsEachHostAndReportsOnce: of two member hosts, the one
// whose process is dead is reported once, at its generation, and polled
// no more; the live one is polled once per interval. A shard watch started
// again keeps what it knew: no host is asked again for a generation it
// already answered, and the reported one stays quiet until it re-arms.
func TestShardWatchPollsEachHostAndReportsOnce(t *testing.T) {
	dir := t.TempDir()
	live := watchEntry(t, dir, "proc-live")
	deadPid := filepath.Join(dir, "gone.pid")
	must(t, os.WriteFile(deadPid, []byte("999999\n"), 0o644))
	gone := WatchEntry{Process: proc.ProcessID{Namespace: "t", Name: "gone"},
		Spec: policies.WithDefaults(proc.Spec{ProcName: "gone", SetupPath: dir, PidPath: deadPid, AutoType: proc.AutoResident})}
	inv, err := inventory.New("", inventory.Host{User: "root"}, nil, []inventory.Host{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}})
	must(t, err)
	input := func(ip string, e WatchEntry) *WatchInput {
		return &WatchInput{Target: proc.Target{IP: ip}, Entries: []WatchEntry{e}, Interval: 200 * time.Millisecond}
	}
	hosts := newFakeHosts(map[string]HostWatch{
		"host:0:10.0.0.1": {Gen: 3, Input: input("10.0.0.1", live)},
		"host:0:10.0.0.2": {Gen: 5, Input: input("10.0.0.2", gone)},
	})
	runner := &countingRunner{execs: map[string]int{}}
	a := &Activities{Inventory: inv, Runner: runner, Hosts: hosts}
	in := ShardWatchInput{Shard: "s", Epoch: 1, Renew: 2 * time.Second,
		Members: []ShardMember{{Host: "host:0:10.0.0.1", Gen: 3}, {Host: "host:0:10.0.0.2", Gen: 5}}}
	if err := a.ShardWatch(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if r := hosts.reported["host:0:10.0.0.2"]; len(r) != 1 || r[0].Gen != 5 || len(r[0].Events) != 1 || r[0].Events[0].Kind != WatchDead {
		t.Fatalf("reports of the dead host: %+v", r)
	}
	if r := hosts.reported["host:0:10.0.0.1"]; len(r) != 0 {
		t.Fatalf("the live host was reported: %+v", r)
	}
	if n := runner.count("10.0.0.2"); n != 1 {
		t.Fatalf("the reported host was polled %d times, want once", n)
	}
	if n := runner.count("10.0.0.1"); n < 5 || n > 11 {
		t.Fatalf("the live host was polled %d times in 2 s at 200 ms", n)
	}

	// Started again (another host joined, say): nothing is asked again.
	in.Epoch = 2
	if err := a.ShardWatch(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if hosts.queries["host:0:10.0.0.1"] != 1 || hosts.queries["host:0:10.0.0.2"] != 1 || runner.count("10.0.0.2") != 1 {
		t.Fatalf("after a restart: queries %v, dead host polled %d times", hosts.queries, runner.count("10.0.0.2"))
	}
	// Its next generation is asked for, and watched.
	hosts.watches["host:0:10.0.0.2"] = HostWatch{Gen: 6, Input: input("10.0.0.2", gone)}
	in.Epoch, in.Members[1].Gen = 3, 6
	if err := a.ShardWatch(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if r := hosts.reported["host:0:10.0.0.2"]; hosts.queries["host:0:10.0.0.2"] != 2 || len(r) != 2 || r[1].Gen != 6 {
		t.Fatalf("generation 6: queries %v, reports %+v", hosts.queries, r)
	}
}

// TestShardWatchNewerEpochTakesOver: a newer watch of a shard on the same
// worker ends the older one at once; an older one arriving late steps
// aside.
func TestShardWatchNewerEpochTakesOver(t *testing.T) {
	inv, err := inventory.New("", inventory.Host{User: "root"}, nil, []inventory.Host{{IP: "10.0.0.1"}})
	must(t, err)
	hosts := newFakeHosts(map[string]HostWatch{})
	a := &Activities{Inventory: inv, Runner: &countingRunner{execs: map[string]int{}}, Hosts: hosts}
	old := make(chan error, 1)
	go func() {
		old <- a.ShardWatch(context.Background(), ShardWatchInput{Shard: "s", Epoch: 1, Renew: time.Minute, Members: []ShardMember{{Host: "h", Gen: 1}}})
	}()
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- a.ShardWatch(context.Background(), ShardWatchInput{Shard: "s", Epoch: 2, Renew: 3 * time.Second, Members: []ShardMember{{Host: "h", Gen: 1}}})
	}()
	select {
	case err := <-old:
		if err != nil || time.Since(began) > 5*time.Second {
			t.Fatalf("the older watch ended with %v after %s", err, time.Since(began))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the older watch went on beside the newer one")
	}
	if err := a.ShardWatch(context.Background(), ShardWatchInput{Shard: "s", Epoch: 1, Renew: time.Minute}); err != nil {
		t.Fatalf("a late older watch: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestShardWatchRestartPollsOnlyWhenDue: a shard watch started again (as
// it is every few seconds while hosts arm one after another) polls a host
// it already knows when that host's poll is due, not at once; a start per
// arm would otherwise poll every member each time.
func TestShardWatchRestartPollsOnlyWhenDue(t *testing.T) {
	dir := t.TempDir()
	live := watchEntry(t, dir, "proc-due")
	inv, err := inventory.New("", inventory.Host{User: "root"}, nil, []inventory.Host{{IP: "10.0.0.1"}})
	must(t, err)
	hosts := newFakeHosts(map[string]HostWatch{
		"host:0:10.0.0.1": {Gen: 1, Input: &WatchInput{Target: proc.Target{IP: "10.0.0.1"}, Entries: []WatchEntry{live}, Interval: time.Minute}},
	})
	runner := &countingRunner{execs: map[string]int{}}
	a := &Activities{Inventory: inv, Runner: runner, Hosts: hosts}
	in := ShardWatchInput{Shard: "s", Epoch: 1, Renew: 500 * time.Millisecond, Members: []ShardMember{{Host: "host:0:10.0.0.1", Gen: 1}}}
	for epoch := 1; epoch <= 4; epoch++ {
		in.Epoch = epoch
		if err := a.ShardWatch(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	if n := runner.count("10.0.0.1"); n != 1 {
		t.Fatalf("four starts of the shard within its one-minute interval polled the host %d times, want once", n)
	}
}

// TestShardWatchWaitsForAnArmItsHostHasNotRecorded: a shard knows a host's
// generation before the host's own state shows it (the workflow task that
// armed is under way, or was lost with a server restart and runs again,
// arming the same generation, which starts no new watch). The watch asks
// the host again, and polls it once the host shows that generation.
func TestShardWatchWaitsForAnArmItsHostHasNotRecorded(t *testing.T) {
	dir := t.TempDir()
	deadPid := filepath.Join(dir, "gone.pid")
	must(t, os.WriteFile(deadPid, []byte("999999\n"), 0o644))
	gone := WatchEntry{Process: proc.ProcessID{Namespace: "t", Name: "gone"},
		Spec: policies.WithDefaults(proc.Spec{ProcName: "gone", SetupPath: dir, PidPath: deadPid, AutoType: proc.AutoResident})}
	inv, err := inventory.New("", inventory.Host{User: "root"}, nil, []inventory.Host{{IP: "10.0.0.1"}})
	must(t, err)
	armed := HostWatch{Gen: 1, Input: &WatchInput{Target: proc.Target{IP: "10.0.0.1"}, Entries: []WatchEntry{gone}, Interval: 200 * time.Millisecond}}
	hosts := newFakeHosts(map[string]HostWatch{"host:0:10.0.0.1": {}})
	hosts.next = map[string]HostWatch{"host:0:10.0.0.1": armed}
	a := &Activities{Inventory: inv, Runner: &countingRunner{execs: map[string]int{}}, Hosts: hosts}
	in := ShardWatchInput{Shard: "s", Epoch: 1, Renew: 8 * time.Second, Members: []ShardMember{{Host: "host:0:10.0.0.1", Gen: 1}}}
	if err := a.ShardWatch(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if r := hosts.reported["host:0:10.0.0.1"]; hosts.queries["host:0:10.0.0.1"] != 2 || len(r) != 1 || r[0].Gen != 1 {
		t.Fatalf("queries %v, reports %+v: the dead process was not reported once its host showed the arm", hosts.queries, r)
	}
}
