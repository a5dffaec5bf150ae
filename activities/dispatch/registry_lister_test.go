package dispatch

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestRegistryListerListsWaitingBatchesTogether: batches that read their
// registries while the worker's listings are busy are listed together,
// whole and within registryListMax hosts a listing, and each gets its own
// hosts' memos.
func TestRegistryListerListsWaitingBatchesTogether(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, registryListers)
	var mu sync.Mutex
	var sizes []int
	l := &registryLister{list: func(_ context.Context, hosts []proc.HostID) (map[proc.HostID][]workflows.Entry, error) {
		mu.Lock()
		sizes = append(sizes, len(hosts))
		first := len(sizes) <= registryListers
		mu.Unlock()
		if first {
			started <- struct{}{}
			<-release
		}
		out := map[proc.HostID][]workflows.Entry{}
		for _, h := range hosts {
			out[h] = []workflows.Entry{{Process: proc.ProcessID{Namespace: "ns", Name: h.IP}}}
		}
		return out, nil
	}}
	batch := func(b int) []proc.HostID {
		hosts := make([]proc.HostID, 100)
		for i := range hosts {
			hosts[i] = proc.HostID{IP: fmt.Sprintf("10.0.%d.%d", b, i)}
		}
		return hosts
	}
	const batches = 10
	errs := make(chan error, batches)
	read := func(b int) {
		hosts := batch(b)
		got, err := l.registries(context.Background(), hosts)
		if err == nil {
			for _, h := range hosts {
				if e := got[h]; len(e) != 1 || e[0].Process.Name != h.IP {
					err = fmt.Errorf("batch %d: host %s got %+v", b, h.IP, e)
					break
				}
			}
		}
		errs <- err
	}
	// The first two batches take both listers, which wait.
	for b := range registryListers {
		go read(b)
		<-started
	}
	for b := registryListers; b < batches; b++ {
		go read(b)
	}
	for queued := 0; queued < batches-registryListers; {
		l.mu.Lock()
		queued = len(l.queue)
		l.mu.Unlock()
		runtime.Gosched()
	}
	close(release)
	for range batches {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// 2 listings of one batch each, then 8 batches in two of at most 500.
	if len(sizes) != 4 {
		t.Fatalf("listings named %v hosts; want 4 listings: the two first batches alone, then the eight that waited in two", sizes)
	}
	total := 0
	for _, n := range sizes {
		if n > registryListMax {
			t.Errorf("a listing named %d hosts; at most %d", n, registryListMax)
		}
		total += n
	}
	if total != batches*100 {
		t.Errorf("listings named %d hosts in all; want each of the %d once", total, batches*100)
	}
}

// TestRegistryListerNamesAHostOnce: two batches with the same host waiting
// together name it once in their listing.
func TestRegistryListerNamesAHostOnce(t *testing.T) {
	h := proc.HostID{IP: "10.0.0.1"}
	var named [][]proc.HostID
	l := &registryLister{list: func(_ context.Context, hosts []proc.HostID) (map[proc.HostID][]workflows.Entry, error) {
		named = append(named, hosts)
		return map[proc.HostID][]workflows.Entry{h: nil}, nil
	}}
	// Both queued before a lister runs, as behind busy listers.
	a := &registryListing{hosts: []proc.HostID{h}, done: make(chan struct{})}
	b := &registryListing{hosts: []proc.HostID{h, {IP: "10.0.0.2"}}, done: make(chan struct{})}
	l.queue = []*registryListing{a, b}
	l.running = 1
	l.run()
	<-a.done
	<-b.done
	if len(named) != 1 || len(named[0]) != 2 {
		t.Fatalf("listings named %v; want one naming the two hosts once each", named)
	}
	if _, ok := b.out[h]; !ok || a.err != nil || b.err != nil {
		t.Errorf("answers %v, %v (errors %v, %v); want the shared listing's", a.out, b.out, a.err, b.err)
	}
}
