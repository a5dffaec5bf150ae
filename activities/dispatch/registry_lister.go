package dispatch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// registryListMax is the most host workflows one listing names. A listing
// by id costs the dev server's SQLite a read of every running host's row,
// whatever ids it names (its planner takes the status index), so at 10,000
// hosts a hundred listings of a hundred ids read a million rows. The page
// stays far below the 4 MB a response may carry, at memos of several KB.
const registryListMax = 500

// registryListers is how many listings one worker has in flight: the
// batches that read registries meanwhile wait for the next, which names
// theirs together.
const registryListers = 2

// registryListTimeout bounds one listing, whoever waits for it.
const registryListTimeout = 30 * time.Second

// registryLister gathers the registry listings of the batches a worker
// reads at once (status, check) into few, each naming up to
// registryListMax hosts.
type registryLister struct {
	list    func(ctx context.Context, hosts []proc.HostID) (map[proc.HostID][]workflows.Entry, error)
	mu      sync.Mutex
	queue   []*registryListing
	running int
}

// registryListing is one batch's hosts on their way to a listing.
type registryListing struct {
	hosts []proc.HostID
	done  chan struct{}
	out   map[proc.HostID][]workflows.Entry
	err   error
}

func newRegistryLister(c client.Client, dc converter.DataConverter) *registryLister {
	return &registryLister{list: func(ctx context.Context, hosts []proc.HostID) (map[proc.HostID][]workflows.Entry, error) {
		return listRegistries(ctx, c, dc, hosts)
	}}
}

// registries is the specs memo of each of hosts' running host workflows,
// listed with those of other batches waiting at the same time. A host
// missing from the answer has no running workflow, or none with the memo
// yet. With an error the map holds what was listed before it.
func (l *registryLister) registries(ctx context.Context, hosts []proc.HostID) (map[proc.HostID][]workflows.Entry, error) {
	r := &registryListing{hosts: hosts, done: make(chan struct{})}
	l.mu.Lock()
	l.queue = append(l.queue, r)
	if l.running < registryListers {
		l.running++
		go l.run()
	}
	l.mu.Unlock()
	select {
	case <-r.done:
		return r.out, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run lists what is queued, a listing at a time, until nothing is. A
// listing has a context of its own: a batch that stops waiting leaves
// others that still wait.
func (l *registryLister) run() {
	for {
		l.mu.Lock()
		take := l.next()
		if len(take) == 0 {
			l.running--
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		var hosts []proc.HostID
		seen := map[proc.HostID]bool{}
		for _, r := range take {
			for _, h := range r.hosts {
				if !seen[h] {
					seen[h] = true
					hosts = append(hosts, h)
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), registryListTimeout)
		out, err := l.list(ctx, hosts)
		cancel()
		for _, r := range take {
			r.out, r.err = out, err
			close(r.done)
		}
	}
}

// next takes queued batches whole, the first always, then as many as fit
// in registryListMax hosts. The caller holds mu.
func (l *registryLister) next() []*registryListing {
	n, i := 0, 0
	for ; i < len(l.queue); i++ {
		if i > 0 && n+len(l.queue[i].hosts) > registryListMax {
			break
		}
		n += len(l.queue[i].hosts)
	}
	take := l.queue[:i:i]
	l.queue = l.queue[i:]
	return take
}

// listRegistries reads the specs memo of the running host workflows of
// hosts, registryListMax ids a listing.
func listRegistries(ctx context.Context, c client.Client, dc converter.DataConverter, hosts []proc.HostID) (map[proc.HostID][]workflows.Entry, error) {
	out := map[proc.HostID][]workflows.Entry{}
	for start := 0; start < len(hosts); start += registryListMax {
		ids := make([]string, 0, min(registryListMax, len(hosts)-start))
		for _, h := range hosts[start:min(start+registryListMax, len(hosts))] {
			ids = append(ids, "'"+workflows.HostWorkflowID(h)+"'")
		}
		q := fmt.Sprintf("%s AND WorkflowId IN (%s)", engine.RunningHosts(""), strings.Join(ids, ","))
		err := engine.ScanRegistries(ctx, c, dc, q, len(ids), func(h proc.HostID, entries []workflows.Entry, ok bool) {
			if ok {
				out[h] = entries
			}
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}
