package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/transport"
)

// floorPool is the floor's connections: a bare golang.org/x/crypto/ssh
// fan-out with no pool logic, no Temporal, nothing but dial, session, run.
type floorPool struct {
	clients []*ssh.Client
}

func (p *floorPool) close() {
	for _, c := range p.clients {
		if c != nil {
			c.Close()
		}
	}
	p.clients = nil
}

// floorPair runs the probe on every host over new connections (cold), then
// again over the same connections (warm), then runs drover's own status
// probe over them (rich).
func (e *env) floorPair(ctx context.Context, hosts []*testbed.Host) (cold, warm, rich float64, err error) {
	cfg, err := e.floorConfig()
	if err != nil {
		return 0, 0, 0, err
	}
	defer e.floorConns.close()
	e.floorConns.clients = make([]*ssh.Client, len(hosts))
	var times [3]float64
	for i, script := range []string{probeScript, probeScript, transport.ShellCommand(activities.ProbeScript([]string{pidFile}, policies.StatusCPUWindow))} {
		dial := cfg
		if i > 0 {
			dial = nil
		}
		began := time.Now()
		if err := e.floorRun(ctx, hosts, dial, script); err != nil {
			return 0, 0, 0, err
		}
		times[i] = time.Since(began).Seconds()
	}
	return times[0], times[1], times[2], nil
}

func (e *env) floorConfig() (*ssh.ClientConfig, error) {
	pem, err := os.ReadFile(e.bed.ClientKeyPath)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, err
	}
	check, err := knownhosts.New(e.bed.KnownHostsPath)
	if err != nil {
		return nil, err
	}
	return &ssh.ClientConfig{
		User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: check, HostKeyAlgorithms: []string{ssh.KeyAlgoED25519},
		Timeout: time.Minute,
	}, nil
}

// floorRun probes every host at once; cfg non-nil dials new connections.
func (e *env) floorRun(ctx context.Context, hosts []*testbed.Host, cfg *ssh.ClientConfig, script string) error {
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cfg != nil {
				c, err := ssh.Dial("tcp", h.Addr(), cfg)
				if err != nil {
					errs[i] = err
					return
				}
				e.floorConns.clients[i] = c
			}
			sess, err := e.floorConns.clients[i].NewSession()
			if err != nil {
				errs[i] = err
				return
			}
			defer sess.Close()
			out, err := sess.Output(script)
			if err == nil && script == probeScript && !strings.HasPrefix(string(out), "running ") {
				err = fmt.Errorf("probe said %q", out)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("floor: host %s: %w", hosts[i].IP, err)
		}
	}
	return ctx.Err()
}
