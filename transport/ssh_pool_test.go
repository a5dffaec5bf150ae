package transport

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/inventory"
)

func TestConcurrentRunsShareOneHandshake(t *testing.T) {
	bed, hosts := newBed(t, 3)
	s := newSSH(t, bed.KnownHostsPath)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Run(context.Background(), hosts[0], Command{Script: "echo " + strconv.Itoa(i) + "; sleep 0.05"})
			if err == nil && string(res.Stdout) != strconv.Itoa(i)+"\n" {
				err = fmt.Errorf("run %d got %q", i, res.Stdout)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := s.Stats(); st.Handshakes != 1 || st.Execs != n {
		t.Fatalf("after %d concurrent runs: %+v, want 1 handshake", n, st)
	}

	// Later calls, and other hosts, reuse or add one connection each.
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		for _, h := range hosts {
			for j := 0; j < 5; j++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := s.Run(context.Background(), h, Command{Script: "true"}); err != nil {
						t.Error(err)
					}
				}()
			}
		}
		wg.Wait()
	}
	if st := s.Stats(); st.Handshakes != 3 {
		t.Fatalf("three hosts: %+v, want 3 handshakes", st)
	}
}

// TestPoolCapClosesLeastRecentlyUsedIdle makes the least recently used
// connection a busy one: the cap must pass it over for the least recently
// used idle one, and the busy command must finish.
func TestPoolCapClosesLeastRecentlyUsedIdle(t *testing.T) {
	bed, hosts := newBed(t, 4)
	s := newSSH(t, bed.KnownHostsPath, func(o *SSHOptions) { o.MaxPooled = 3 })
	tok := token(t)
	busy := make(chan error, 1)
	go func() {
		res, err := s.Run(context.Background(), hosts[0], Command{Script: "while [ ! -e /data/go-" + tok + " ]; do sleep 0.05; done; echo finished"})
		if err == nil && string(res.Stdout) != "finished\n" {
			err = fmt.Errorf("busy command: stdout %q", res.Stdout)
		}
		busy <- err
	}()
	if !waitRunning(t, bed.Hosts[0], "[/]data/go-"+tok) {
		t.FailNow()
	}
	for _, h := range []inventory.Host{hosts[1], hosts[2], hosts[1]} {
		run(t, s, h, Command{Script: "true"})
	}
	// Oldest first: hosts[0] (busy), hosts[2], hosts[1]. A fourth host is
	// one over the cap.
	run(t, s, hosts[3], Command{Script: "true"})
	waitStat(t, s, "trims", trims, 1)
	hostExec(t, bed.Hosts[0], "touch /data/go-"+tok)
	if err := <-busy; err != nil {
		t.Fatalf("the busy connection was closed under its command: %v", err)
	}
	if st := s.Stats(); st.Trims != 1 || st.Handshakes != 4 {
		t.Fatalf("after a fourth host with a cap of 3: %+v, want 1 trim and 4 handshakes", st)
	}
	for _, h := range []inventory.Host{hosts[0], hosts[1], hosts[3]} {
		run(t, s, h, Command{Script: "true"})
	}
	if st := s.Stats(); st.Handshakes != 4 {
		t.Fatalf("the kept connections were dialled again: %+v", st)
	}
	run(t, s, hosts[2], Command{Script: "true"})
	if st := s.Stats(); st.Handshakes != 5 {
		t.Fatalf("the trimmed host must dial again: %+v", st)
	}
}

func TestKeepAliveEvictsFrozenConnection(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath, func(o *SSHOptions) { o.KeepAlive = 500 * time.Millisecond })
	run(t, s, hosts[0], Command{Script: "true"})
	if err := bed.Hosts[0].Pause(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Evictions == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	bed.Hosts[0].Resume()
	if st := s.Stats(); st.Evictions == 0 {
		t.Fatalf("frozen connection not evicted: %+v", st)
	}
	run(t, s, hosts[0], Command{Script: "true"})
	if st := s.Stats(); st.Handshakes < 2 {
		t.Errorf("want a fresh connection after eviction: %+v", st)
	}
}

// sessionChildren are the listener's children: one per client connection.
func sessionChildren(t *testing.T, listener int) []int {
	t.Helper()
	return liveProcs(func(f []string) bool { return len(f) > 1 && f[1] == strconv.Itoa(listener) })
}

func dropConnections(t *testing.T, h *testbed.Host) {
	t.Helper()
	kids := sessionChildren(t, h.Pid())
	if len(kids) == 0 {
		t.Error("no sshd connection processes found")
	}
	for _, pid := range kids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

func TestConnectionDropReconnects(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath)
	h, th := hosts[0], bed.Hosts[0]
	run(t, s, h, Command{Script: "true"})

	dropConnections(t, th)
	if got := string(run(t, s, h, Command{Script: "echo again"}).Stdout); got != "again\n" {
		t.Fatalf("after drop: %q", got)
	}
	if st := s.Stats(); st.Handshakes != 2 {
		t.Errorf("stats %+v, want a second handshake", st)
	}

	// A connection that died before the command was sent is retried on a
	// fresh one: runOn reports it as fresh, and Run succeeds.
	c, err := s.get(context.Background(), keyFor(h))
	if err != nil {
		t.Fatal(err)
	}
	c.client.Close()
	_, err, fresh := s.runOn(context.Background(), c, h.User, Command{Script: "true"})
	if !fresh || KindOf(err) != KindUnreachable {
		t.Errorf("dead connection: fresh=%v err=%v", fresh, err)
	}
	run(t, s, h, Command{Script: "true"})

	// A connection lost mid-command is reported, never re-run.
	tok := token(t)
	go func() {
		if waitRunning(t, th, "^sleep 30\\."+tok+"$") {
			dropConnections(t, th)
		}
	}()
	_, err = s.Run(context.Background(), h, Command{Script: "echo x >> /data/runs-" + tok + "; sleep 30." + tok})
	wantKind(t, err, KindUnreachable)
	if out := hostExec(t, th, "cat /data/runs-"+tok); out != "x" {
		t.Errorf("command ran %q times", out)
	}
	run(t, s, h, Command{Script: "true"})
}

func TestCloseFailsLaterRuns(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath)
	run(t, s, hosts[0], Command{Script: "true"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Run(context.Background(), hosts[0], Command{Script: "true"})
	if !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// waitStat waits until a counter reaches want: the pool closes trimmed
// and idle connections in the background.
func waitStat(t *testing.T, s *SSH, name string, pick func(SSHStats) int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for pick(s.Stats()) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached %d: %+v", name, want, s.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func trims(st SSHStats) int64 { return st.Trims }

// behindBastion returns hosts[1:] reached through hosts[0] as a bastion.
func behindBastion(t *testing.T, bed *testbed.Bed, hosts []inventory.Host) []inventory.Host {
	t.Helper()
	var entries []inventory.Host
	for _, h := range hosts[1:] {
		entries = append(entries, inventory.Host{IP: h.IP, CloudID: 7})
	}
	inv, err := inventory.New(bed.KnownHostsPath,
		inventory.Host{User: "root", IdentityFile: bed.ClientKeyPath},
		map[int]inventory.Bastion{7: {User: "root", Address: hosts[0].DialAddress(), IdentityFile: bed.ClientKeyPath}},
		entries)
	if err != nil {
		t.Fatal(err)
	}
	out := inv.Hosts()
	for _, h := range out {
		if h.Bastion == nil {
			t.Fatal("inventory did not attach the bastion")
		}
	}
	return out
}

// TestBastionSurvivesPoolTrim fills the pool with a bastion, being the
// least recently used connection, and two hosts behind it. A direct host
// over the cap must trim a host connection, not the bastion: closing that
// would drop both tunnels at once.
func TestBastionSurvivesPoolTrim(t *testing.T) {
	bed, hosts := newBed(t, 3)
	via := behindBastion(t, bed, hosts)
	b1, b2, direct := via[0], via[1], hosts[1]
	s := newSSH(t, bed.KnownHostsPath, func(o *SSHOptions) { o.MaxPooled = 3 })
	for _, h := range []inventory.Host{b1, b2, b1, b2} {
		run(t, s, h, Command{Script: "true"})
	}
	if st := s.Stats(); st.Handshakes != 3 {
		t.Fatalf("bastion and two hosts behind it: %+v, want 3 handshakes", st)
	}
	run(t, s, direct, Command{Script: "true"})
	waitStat(t, s, "trims", trims, 1)

	// The bastion stayed, so the tunnel of the host not trimmed still works.
	run(t, s, b2, Command{Script: "true"})
	if st := s.Stats(); st.Handshakes != 4 || st.Trims != 1 {
		t.Fatalf("after the direct host: %+v, want 4 handshakes and 1 trim: the bastion or b2 was closed", st)
	}
	// The trimmed host is dialled again through the same bastion.
	run(t, s, b1, Command{Script: "true"})
	if st := s.Stats(); st.Handshakes != 5 {
		t.Fatalf("b1 again: %+v, want only b1 dialled again, through the same bastion", st)
	}
}

func idleClosed(st SSHStats) int64 { return st.IdleClosed }

// TestIdleTimeoutClosesUnusedConnection leaves a connection unused past
// the idle timeout: it is closed, and the next command dials again.
func TestIdleTimeoutClosesUnusedConnection(t *testing.T) {
	bed, hosts := newBed(t, 1)
	s := newSSH(t, bed.KnownHostsPath, func(o *SSHOptions) { o.IdleTimeout = 300 * time.Millisecond })
	run(t, s, hosts[0], Command{Script: "true"})
	waitStat(t, s, "idle closes", idleClosed, 1)
	run(t, s, hosts[0], Command{Script: "true"})
	if st := s.Stats(); st.Handshakes != 2 || st.Evictions != 0 {
		t.Fatalf("after the idle close: %+v, want a second handshake", st)
	}
}

// TestIdleTimeoutSparesBusyAndBastion runs the idle pass as if hours had
// gone by. It must close only what is unused: not a connection with a
// command running, nor the bastion that command's connection rides on,
// which follows its riders on a later pass.
func TestIdleTimeoutSparesBusyAndBastion(t *testing.T) {
	bed, hosts := newBed(t, 3)
	behind, direct := behindBastion(t, bed, hosts[:2])[0], hosts[2]
	// The timeout is long, so only the passes the test makes close anything.
	s := newSSH(t, bed.KnownHostsPath, func(o *SSHOptions) { o.IdleTimeout = time.Hour })
	run(t, s, direct, Command{Script: "true"})
	tok := token(t)
	busy := make(chan error, 1)
	go func() {
		_, err := s.Run(context.Background(), behind, Command{Script: "while [ ! -e /data/go-" + tok + " ]; do sleep 0.05; done"})
		busy <- err
	}()
	if !waitRunning(t, bed.Hosts[1], "[/]data/go-"+tok) {
		t.FailNow()
	}
	later := func() time.Time { return time.Now().Add(3 * time.Hour) }

	s.closeIdleAt(later())
	if st := s.Stats(); st.IdleClosed != 1 || st.Handshakes != 3 {
		t.Fatalf("first pass: %+v, want only the direct host closed", st)
	}
	hostExec(t, bed.Hosts[1], "touch /data/go-"+tok)
	if err := <-busy; err != nil {
		t.Fatalf("the busy connection or its bastion was closed under its command: %v", err)
	}
	run(t, s, behind, Command{Script: "true"})
	if st := s.Stats(); st.Handshakes != 3 {
		t.Fatalf("the busy host's connection was dialled again: %+v", st)
	}

	// Now idle, the host behind the bastion goes; the bastion stays until
	// the next pass.
	s.closeIdleAt(later())
	if st := s.Stats(); st.IdleClosed != 2 {
		t.Fatalf("second pass: %+v, want the host behind the bastion closed", st)
	}
	s.closeIdleAt(later())
	if st := s.Stats(); st.IdleClosed != 3 {
		t.Fatalf("third pass: %+v, want the bastion closed", st)
	}
	run(t, s, behind, Command{Script: "true"})
	if st := s.Stats(); st.Handshakes != 5 {
		t.Fatalf("after every idle close: %+v, want bastion and host dialled again", st)
	}
}
