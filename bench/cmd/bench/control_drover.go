package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/proc"
)

// droverCtlRun is where one drover op of the control part spent its time,
// from the starter's wall clock, the task's history and its hosts'
// histories, and what it cost the engine.
type droverCtlRun struct {
	Op   string
	Warm bool
	// Hosts is the host ops the run asked for.
	Hosts int
	// Total is the starter's wall time; ToStart from exec to the task's
	// start; ToDeliver from the task's start to its first Deliver batch's
	// start; Delivering from then to the last batch's end; Closed from
	// that to the task's close; Fetch from its close to the starter's
	// exit.
	Total, ToStart, ToDeliver, Delivering, Closed, Fetch float64
	// Batches is the task's Deliver activities; Batch the longest one.
	Batches int
	Batch   float64
	// Per host, the p50 and max of: the task's start to the start of the
	// host's workflow task that took the op's update (Taken); that to the
	// op's end as its history records it, the local activity's marker or,
	// past the local budget, the HostOp activity's completion (Ran); that
	// to the update's completion (Answered); the task's start to the
	// update's completion (Answer).
	Taken, Ran, Answered, Answer [2]float64
	// HandedOver is the hosts whose op outlasted the local budget and went
	// on as an activity.
	HandedOver int
	// HostTasks is the workflow tasks a host workflow ran for the op (p50);
	// TaskTasks the task's own.
	HostTasks, TaskTasks int
	Handshakes, Execs    int64
	// Engine is the dev server's work during the op, when its metrics are
	// served.
	Engine engineUse
	// CPU is what the machine's cores spent while the starter ran.
	CPU cpuSplit
}

// metricsLag is how long the dev server takes to publish its counters: a
// reading this long after an op has all of it.
const metricsLag = 2 * time.Second

// ctlInterval is the control part's supervision interval: drover's
// default, as shipped (the supervision part measures supInterval).
var ctlInterval = config.Defaults().SuperviseInterval

// ctlSettle is how long after a control op's answer its engine work is
// counted: the control part's hosts are supervised, as drover ships, and
// the watch an op started again has by then polled once and sent its
// first heartbeat.
var ctlSettle = ctlInterval + metricsLag

// droverControl runs `starter api` with body on hosts for op name, checks
// every host answered want, and measures the run. The control ops (start,
// restart, stop) are split by their histories.
func (e *env) droverControl(ctx context.Context, name, api, body string, want proc.Code, hosts []*testbed.Host) (droverCtlRun, error) {
	// Let the last op's history reads and writes land before counting
	// this one's.
	time.Sleep(metricsLag)
	before := e.worker.SSH.Stats()
	snap := e.serverSnapshot()
	cpu := markCPU(e.serverPid, e.bedHosts())
	a, err := e.starterAPI(ctx, api, body, e.cfg.TaskQueue, e.cfg.Inventory)
	if err != nil {
		return droverCtlRun{}, err
	}
	used := cpu.since(e.serverPid, e.bedHosts())
	after := e.worker.SSH.Stats()
	time.Sleep(ctlSettle)
	r := droverCtlRun{Op: name, Hosts: len(hosts), Total: a.Took.Seconds(),
		Engine:     usedBetween(snap, e.serverSnapshot(), e.cfg.TemporalNamespace),
		Handshakes: after.Handshakes - before.Handshakes, Execs: after.Execs - before.Execs, CPU: used}
	if a.Codes[want] != len(hosts) {
		return r, fmt.Errorf("drover %s: %d of %d hosts answered %d (%v); the others: %s", name, a.Codes[want], len(hosts), want, a.Exit, codeSummary(a.Codes, a.Example))
	}
	if !isCtlOp(name) {
		return r, nil
	}
	return r, e.ctlBreakdown(ctx, a.Began, a.Took, hosts, &r)
}

// droverCtlOp runs control op name on hosts. Its body's file is named for
// the control part: the status part keeps a body of its own per size.
func (e *env) droverCtlOp(ctx context.Context, name string, op proc.OpType, want proc.Code, hosts []*testbed.Host) (droverCtlRun, error) {
	body := filepath.Join(e.dir, fmt.Sprintf("%s-%s-%d.json", ctlName, name, len(hosts)))
	if err := operateBody(body, ctlNS, ctlName, op, ips(hosts)); err != nil {
		return droverCtlRun{}, err
	}
	return e.droverControl(ctx, name, gseapi.APIOperateProcess, body, want, hosts)
}

// droverCtlRegister registers the control part's process on hosts with
// register_proc_info.
func (e *env) droverCtlRegister(ctx context.Context, hosts []*testbed.Host) (droverCtlRun, error) {
	body := filepath.Join(e.dir, fmt.Sprintf("%s-register-%d.json", ctlName, len(hosts)))
	if err := registerBody(body, ctlNS, ctlName, ctlSpec(), ips(hosts)); err != nil {
		return droverCtlRun{}, err
	}
	return e.droverControl(ctx, "register", gseapi.APIRegisterProcInfo, body, proc.CodeSuccess, hosts)
}

func isCtlOp(name string) bool {
	for _, o := range ctlOps {
		if o.name == name {
			return true
		}
	}
	return false
}

func ips(hosts []*testbed.Host) []string {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = h.IP
	}
	return out
}

// codeSummary is "CODE×N" for each code, with an example message of each
// failing code.
func codeSummary(codes map[proc.Code]int, example map[proc.Code]string) string {
	var parts []string
	for _, c := range sortedCodes(codes) {
		s := fmt.Sprintf("%d×%d", c, codes[c])
		if m := example[c]; m != "" {
			s += " (" + oneLineOf(m) + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
