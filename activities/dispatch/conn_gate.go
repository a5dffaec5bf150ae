package dispatch

import (
	"context"
	"sync"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
)

// connGate bounds the updates a worker has in flight to the hosts of one
// SSH connection: identities that share an address, and so the sessions
// of one connection (policies.DeliverPerConnection).
type connGate struct {
	mu    sync.Mutex
	slots map[string]chan struct{}
}

// enter waits for a slot of h's connection, which runs sessions execs at
// once, and returns its release; a host with no session bound (not SSH,
// or sessions 0) passes at once.
func (g *connGate) enter(ctx context.Context, h inventory.Host, sessions int) (release func(), err error) {
	if sessions <= 0 || h.Transport != inventory.TransportSSH {
		return func() {}, nil
	}
	key := h.User + "@" + h.DialAddress()
	g.mu.Lock()
	if g.slots == nil {
		g.slots = map[string]chan struct{}{}
	}
	ch, ok := g.slots[key]
	if !ok {
		ch = make(chan struct{}, policies.DeliverPerConnection(sessions))
		g.slots[key] = ch
	}
	g.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
