package activities

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// TestProbeTakesWhatItIsToldOfThisBoot: told the boot it runs in, the
// probe takes the host's facts as given (a made-up clock rate shows it
// read none of them) but still reads whom it runs as; told another boot,
// it reads the host in full.
func TestProbeTakesWhatItIsToldOfThisBoot(t *testing.T) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skip("no boot id here")
	}
	me, err := user.Current()
	must(t, err)
	told := &hostKnown{bootID: strings.TrimSpace(string(boot)), cpus: 3, hz: 4242, page: 4096, mem: 1 << 30, bootTime: 1, user: "somebody-else"}
	host, _, err := ParseProbe(runLocal(t, probeScript([]string{"/nonexistent.pid"}, 0, told)), 1)
	must(t, err)
	if host.ClockTicks != 4242 || host.CPUs != 3 || host.User != me.Username {
		t.Errorf("told this boot: hz %d, cpus %d, user %q; want the told 4242 and 3, and the user read again (%q)", host.ClockTicks, host.CPUs, host.User, me.Username)
	}
	told.bootID = "another-boot"
	host, _, err = ParseProbe(runLocal(t, probeScript([]string{"/nonexistent.pid"}, 0, told)), 1)
	must(t, err)
	if host.ClockTicks == 4242 || host.CPUs == 3 && host.MemTotal == 1<<30 {
		t.Errorf("told another boot: hz %d, cpus %d, mem %d; want the host read in full", host.ClockTicks, host.CPUs, host.MemTotal)
	}
}

// recording runs commands locally and keeps their arguments.
type recording struct {
	localRunner
	mu   sync.Mutex
	args [][]string
}

func (r *recording) Run(ctx context.Context, h inventory.Host, cmd transport.Command) (transport.Result, error) {
	r.mu.Lock()
	r.args = append(r.args, cmd.Args)
	r.mu.Unlock()
	return r.localRunner.Run(ctx, h, cmd)
}

// TestOpsReadAHostInFullOnceABoot: the first probe of a host reads it in
// full; the probes after it, the post-checks in control execs included,
// are told its boot, and every op still answers as before.
func TestOpsReadAHostInFullOnceABoot(t *testing.T) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skip("no boot id here")
	}
	bootID := strings.TrimSpace(string(boot))
	me, err := user.Current()
	must(t, err)
	dir := t.TempDir()
	inv, err := inventory.New("", inventory.Host{}, nil, []inventory.Host{{IP: "10.0.0.8"}})
	must(t, err)
	r := &recording{}
	a := &Activities{Inventory: inv, Runner: r}
	spec := proc.Spec{ProcName: "sleep", SetupPath: dir, PidPath: dir + "/svc.pid", Account: me.Username,
		StartCmd: "sleep 30 & echo $! > svc.pid", StopCmd: "kill $(cat svc.pid)", StartCheck: 200 * time.Millisecond,
		AutoType: proc.AutoResident, OpTimeout: 30 * time.Second}
	run := func(op proc.OpType) {
		t.Helper()
		out, err := a.HostOp(context.Background(), HostOpInput{Op: op, Attempt: 1, Target: proc.Target{IP: "10.0.0.8"},
			RequestID: fmt.Sprint(op, time.Now().UnixNano()), Process: proc.ProcessID{Namespace: "t", Name: "svc"}, Spec: spec})
		must(t, err)
		if out.Result.Code != proc.CodeSuccess {
			t.Fatalf("%s: %d %s", op, out.Result.Code, out.Result.Message)
		}
	}
	run(proc.OpStart)
	told := func(from int) (n int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, args := range r.args[from:] {
			if slices.Contains(args, bootID) {
				n++
			}
		}
		return n
	}
	r.mu.Lock()
	first := len(r.args)
	r.mu.Unlock()
	// The start is one exec, its probe and post-check in it: nothing was
	// known of the host, so it reads the host in full.
	if first != 1 || told(0) != 0 {
		t.Fatalf("the start: %d execs, %d told the boot; want one, not told", first, told(0))
	}
	run(proc.OpStatus)
	run(proc.OpStop)
	r.mu.Lock()
	later := len(r.args) - first
	r.mu.Unlock()
	// status: its probe; stop: its probe, and the stop exec's post-check.
	if n := told(first); n < 2 || n != later {
		t.Errorf("of the %d commands after the first op, %d were told the boot; want every one", later, n)
	}
}
