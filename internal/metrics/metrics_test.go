package metrics

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/transport"
)

// scripted answers each host with the error listed for it.
type scripted map[string]error

func (s scripted) Run(_ context.Context, h inventory.Host, _ transport.Command) (transport.Result, error) {
	return transport.Result{}, s[h.IP]
}

func TestReachabilityFollowsTheLastCommand(t *testing.T) {
	m := New(func() transport.SSHStats { return transport.SSHStats{Handshakes: 3, PoolHits: 7} })
	defer m.Close()
	answers := scripted{
		"127.0.0.2": nil,
		"127.0.0.3": &transport.Error{Kind: transport.KindUnreachable, Err: errors.New("connection refused")},
		"127.0.0.4": &transport.Error{Kind: transport.KindAuth, Err: errors.New("denied")},
		"127.0.0.5": &transport.Error{Kind: transport.KindTimeout, Err: errors.New("slow")},
	}
	r := m.Track(answers)
	run := func(ip string) {
		_, _ = r.Run(context.Background(), inventory.Host{IP: ip}, transport.Command{Script: "true"})
	}
	for _, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		run(ip)
	}
	// Refused credentials still reached the host; refused dials and timeouts did not.
	want := `
# HELP drover_hosts_reachable Hosts whose last command reached them.
# TYPE drover_hosts_reachable gauge
drover_hosts_reachable 2
# HELP drover_hosts_unreachable Hosts whose last command could not connect or timed out.
# TYPE drover_hosts_unreachable gauge
drover_hosts_unreachable 2
# HELP drover_ssh_handshakes_total SSH handshakes made (each is a new pooled connection).
# TYPE drover_ssh_handshakes_total counter
drover_ssh_handshakes_total 3
# HELP drover_ssh_pool_hits_total Commands that reused a pooled SSH connection.
# TYPE drover_ssh_pool_hits_total counter
drover_ssh_pool_hits_total 7
`
	names := []string{"drover_hosts_reachable", "drover_hosts_unreachable", "drover_ssh_handshakes_total", "drover_ssh_pool_hits_total"}
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	// The host comes back; a cancelled command changes nothing.
	answers["127.0.0.3"] = nil
	run("127.0.0.3")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	answers["127.0.0.2"] = &transport.Error{Kind: transport.KindUnreachable, Err: context.Canceled}
	_, _ = r.Run(ctx, inventory.Host{IP: "127.0.0.2"}, transport.Command{})
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(`
# HELP drover_hosts_reachable Hosts whose last command reached them.
# TYPE drover_hosts_reachable gauge
drover_hosts_reachable 3
`), "drover_hosts_reachable"); err != nil {
		t.Fatal(err)
	}
}

func TestServeAnswersMetrics(t *testing.T) {
	m := New(nil)
	defer m.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx, ln) }()
	if err := testutil.ScrapeAndCompare("http://"+ln.Addr().String()+"/metrics", strings.NewReader(`
# HELP drover_hosts_reachable Hosts whose last command reached them.
# TYPE drover_hosts_reachable gauge
drover_hosts_reachable 0
`), "drover_hosts_reachable"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after cancel: %v", err)
	}
}

// connecting is a runner that can connect ahead; it notes the hosts.
type connecting struct {
	scripted
	connected []string
}

func (c *connecting) Connect(_ context.Context, h inventory.Host) error {
	c.connected = append(c.connected, h.IP)
	return nil
}

func TestTrackPassesConnectThrough(t *testing.T) {
	m := New(nil)
	defer m.Close()
	inner := &connecting{scripted: scripted{}}
	c, ok := m.Track(inner).(transport.Connector)
	if !ok {
		t.Fatal("the tracking wrapper hides Connect")
	}
	if err := c.Connect(context.Background(), inventory.Host{IP: "127.0.0.2"}); err != nil {
		t.Fatal(err)
	}
	if len(inner.connected) != 1 || inner.connected[0] != "127.0.0.2" {
		t.Fatalf("wrapped runner connected to %v", inner.connected)
	}
	// A wrapped runner without Connect makes it a no-op.
	if err := m.Track(scripted{}).(transport.Connector).Connect(context.Background(), inventory.Host{IP: "127.0.0.3"}); err != nil {
		t.Fatal(err)
	}
}
