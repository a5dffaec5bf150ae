package transport

import (
	"context"
	"testing"

	"github.com/drover-sh/drover/inventory"
)

// recorder is a Runner that notes which hosts it was asked to connect to.
type recorder struct{ connected []string }

func (r *recorder) Run(context.Context, inventory.Host, Command) (Result, error) {
	return Result{}, nil
}

func (r *recorder) Connect(_ context.Context, h inventory.Host) error {
	r.connected = append(r.connected, h.IP)
	return nil
}

// runOnly is a Runner without Connect.
type runOnly struct{}

func (runOnly) Run(context.Context, inventory.Host, Command) (Result, error) {
	return Result{}, nil
}

func TestMultiPassesConnectThrough(t *testing.T) {
	ssh, winrm := &recorder{}, &recorder{}
	var r Runner = Multi{SSH: ssh, WinRM: winrm}
	c, ok := r.(Connector)
	if !ok {
		t.Fatal("Multi hides Connect")
	}
	ctx := context.Background()
	for _, h := range []inventory.Host{
		{IP: "10.0.0.1"},
		{IP: "10.0.0.2", Transport: inventory.TransportSSH},
		{IP: "10.0.0.3", Transport: inventory.TransportWinRM},
	} {
		if err := c.Connect(ctx, h); err != nil {
			t.Fatalf("Connect(%s): %v", h.IP, err)
		}
	}
	if got := ssh.connected; len(got) != 2 || got[0] != "10.0.0.1" || got[1] != "10.0.0.2" {
		t.Errorf("ssh runner connected to %v, want the two ssh hosts", got)
	}
	if got := winrm.connected; len(got) != 1 || got[0] != "10.0.0.3" {
		t.Errorf("winrm runner connected to %v, want the winrm host", got)
	}

	// A transport without Connect, or none at all, has nothing to do ahead.
	for _, m := range []Multi{{SSH: runOnly{}, WinRM: runOnly{}}, {}} {
		for _, tr := range []string{"", inventory.TransportWinRM} {
			if err := Runner(m).(Connector).Connect(ctx, inventory.Host{IP: "10.0.0.4", Transport: tr}); err != nil {
				t.Errorf("Connect over %T, transport %q: %v", m.SSH, tr, err)
			}
		}
	}
}
