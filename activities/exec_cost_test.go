package activities

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/transport"
)

// BenchmarkExecHostCPU measures what one exec of each of drover's scripts
// costs a host: the machine's busy CPU time (/proc/stat) less this
// process's own, per exec, over one testbed sshd and one SSH connection,
// 8 execs in flight. Everything else on the machine counts too: run it on
// a quiet machine, and compare figures of one run.
//
//	go test -run '^$' -bench ExecHostCPU -benchtime 300x ./activities/
func BenchmarkExecHostCPU(b *testing.B) {
	bed := testbed.New(b, testbed.Options{Hosts: 1})
	inv, err := inventory.Load(bed.InventoryPath)
	if err != nil {
		b.Fatal(err)
	}
	h := inv.Hosts()[0]
	s, err := transport.NewSSH(transport.SSHOptions{KnownHostsPath: bed.KnownHostsPath})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	run := func(c transport.Command) transport.Result {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := s.Run(ctx, h, c)
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
	first := run(ProbeScript([]string{"/data/none.pid"}, 0))
	info, _, err := ParseProbe(string(first.Stdout), 1)
	if err != nil {
		b.Fatal(err)
	}
	known := knownHost(info)
	run(transport.Command{Script: "setsid sleep 3600 </dev/null >/dev/null 2>&1 & echo $! > /data/live.pid"})
	for _, c := range []struct {
		name string
		cmd  transport.Command
	}{
		{"true", transport.Command{Script: "true"}},
		{"op-probe", probeScript([]string{"/data/live.pid"}, 0, known)},
		{"status-probe", probeScript([]string{"/data/live.pid"}, 300*time.Millisecond, known)},
		{"guarded-start", checkedControlScript(opMark{}, "/data", 10*time.Second, nil, "/data/none.pid", known, info.User, controlExec{cmd: "true", guard: startGuard})},
	} {
		b.Run(c.name, func(b *testing.B) {
			run(c.cmd)
			busy0, self0 := busyCPU(b, info.ClockTicks), selfCPU()
			b.ResetTimer()
			work := make(chan struct{}, b.N)
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range work {
						run(c.cmd)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			// The watchdogs' sleeps, killed or ended, are reaped by now.
			time.Sleep(1100 * time.Millisecond)
			self := selfCPU() - self0
			host := busyCPU(b, info.ClockTicks) - busy0 - self
			b.ReportMetric(float64(host.Microseconds())/1000/float64(b.N), "host-ms/exec")
			b.ReportMetric(float64(self.Microseconds())/1000/float64(b.N), "client-ms/exec")
		})
	}
}

// busyCPU is the machine's CPU time not idle since boot, from /proc/stat,
// counted in hz ticks a second (the probe's USER_HZ).
func busyCPU(b *testing.B, hz int) time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(raw), "\n", 2)[0])
	var ticks uint64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / time.Duration(hz)
}

// selfCPU is this process's CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
