package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
)

// TestConnGateBoundsEachConnection: identities of one address share one
// bound, another address has its own, and hosts with no session bound
// pass at once.
func TestConnGateBoundsEachConnection(t *testing.T) {
	var g connGate
	ssh := func(ip, addr string) inventory.Host {
		return inventory.Host{IP: ip, Address: addr, Port: 22, User: "root", Transport: inventory.TransportSSH}
	}
	const sessions = 2
	limit := policies.DeliverPerConnection(sessions)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var in, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 5 * limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			leave, err := g.enter(ctx, ssh("10.0.0."+string(rune('1'+i%9)), "127.0.0.2"), sessions)
			if err != nil {
				t.Error(err)
				return
			}
			n := in.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			in.Add(-1)
			leave()
		}()
	}
	wg.Wait()
	if got := most.Load(); got > int32(limit) {
		t.Errorf("most in flight on one connection = %d, want at most %d", got, limit)
	}

	// The connection's slots all held (a bound that holds fewer fails
	// here): another address, and hosts without a session bound, still
	// pass, and one more of this connection waits.
	var held []func()
	for range limit {
		leave, err := g.enter(ctx, ssh("10.0.1.1", "127.0.0.2"), sessions)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, leave)
	}
	for _, h := range []inventory.Host{
		ssh("10.0.2.1", "127.0.0.3"),
		{IP: "10.0.3.1", Address: "127.0.0.2", Port: 5985, Transport: inventory.TransportWinRM},
		{IP: "10.0.4.1", Transport: inventory.TransportSimulated},
	} {
		leave, err := g.enter(ctx, h, sessions)
		if err != nil {
			t.Fatalf("%s %s: %v", h.Transport, h.DialAddress(), err)
		}
		leave()
	}
	if leave, err := g.enter(ctx, ssh("10.0.1.2", "127.0.0.2"), 0); err != nil {
		t.Fatalf("no session bound: %v", err)
	} else {
		leave()
	}
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if _, err := g.enter(short, ssh("10.0.1.3", "127.0.0.2"), sessions); err == nil {
		t.Error("a full connection let one more in")
	}
	for _, leave := range held {
		leave()
	}
}
