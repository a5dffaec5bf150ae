package e2e

import (
	"testing"

	"github.com/drover-sh/drover/internal/testbed"
)

// TestAgentIDOperateProcMulti drives one process on two real hosts the way
// the node manager's Go successor does: operate_proc_multi by agent_id_list,
// one host by an opaque GSE 2.0 agent id the inventory maps and one by
// "<bk_cloud_id>:<ip>", each op followed through get_proc_operate_result_v2
// every 2 s until no key is 115. An agent id the inventory does not know
// answers its own key with the host-not-in-inventory code while the others
// succeed.
func TestAgentIDOperateProcMulti(t *testing.T) {
	t.Parallel() // it mostly waits
	b := newContractBed(t)
	g := b.gse
	p := dialectProc{ns: "nodeman", name: "bkmonitorbeat", dir: "agentid-beat"}
	p.install(t, b.h0, b.h1)
	pidFile := "/data/" + p.dir + "/" + p.name + ".pid"
	unknown := randomHex(t, 18)
	ids := []string{b.agent, "0:" + b.h1.IP, unknown}
	keys := []string{p.agentKey(ids[0]), p.agentKey(ids[1]), p.agentKey(unknown)}
	known := keys[:2]
	hosts := []*testbed.Host{b.h0, b.h1}

	multi := func(opType int, spec map[string]any) taskAnswers {
		t.Helper()
		task := g.operate(t, "operate_proc_multi", opType, withUnknown(map[string]any{"proc_operate_req": []any{
			map[string]any{"meta": p.meta(), "agent_id_list": ids, "op_type": opType, "spec": spec},
		}}))
		a := g.follow(t, task, opType, nil, keys)
		wantCodes(t, "unknown agent id", a.v2, gseUnknownHost, keys[2])
		return a
	}

	// The start cannot be over at the first poll (it checks liveness 1 s
	// after the command): its keys answer 115 there.
	started := multi(0, p.spec())
	wantCodes(t, "first poll of the start", started.first, gseRunning, known...)
	v2 := started.v2
	wantCodes(t, "start by agent id", v2, gseSuccess, known...)
	pids := make([]int, len(hosts))
	for i, h := range hosts {
		c := controlOf(t, known[i], v2[known[i]])
		if c.Value[0].ProcName != p.name || c.Value[0].Result != "success" {
			t.Fatalf("start content for %s: %+v", known[i], c.Value[0])
		}
		pids[i] = hostPid(t, h, pidFile)
		if pids[i] == 0 || !hostAlive(h, pids[i]) {
			t.Fatalf("after start, %s runs no %s (pid file: %d)", h.IP, p.name, pids[i])
		}
	}

	v2 = multi(2, p.probeSpec()).v2
	wantCodes(t, "status by agent id", v2, gseSuccess, known...)
	for i, h := range hosts {
		c := v2StatusOf(t, known[i], v2[known[i]])
		if pid := runningPid(t, known[i], c); pid != pids[i] {
			t.Fatalf("status for %s reports pid %d, the host runs %d", known[i], pid, pids[i])
		}
		if c.BkAgentID != ids[i] || c.IP != h.IP {
			t.Fatalf("status content for %s: bk_agent_id %q ip %q, want %q and %q", known[i], c.BkAgentID, c.IP, ids[i], h.IP)
		}
	}

	var d gseStatusDataV2
	g.call(t, "get_proc_status_v2", 3, withUnknown(map[string]any{"meta": p.meta(), "agent_id_list": ids[:2]}), &d)
	for i, h := range hosts {
		n := 0
		for _, in := range d.ProcInfos {
			if in.Host.IP != h.IP {
				continue
			}
			n++
			if in.BkAgentID != ids[i] || in.Host.BkAgentID != ids[i] || in.Status != 1 || in.Pid != pids[i] {
				t.Fatalf("get_proc_status_v2 for %q: bk_agent_id %q, host.bk_agent_id %q, status %d, pid %d; want the id as sent, status 1, pid %d",
					ids[i], in.BkAgentID, in.Host.BkAgentID, in.Status, in.Pid, pids[i])
			}
		}
		if n != 1 {
			t.Fatalf("get_proc_status_v2 has %d entries for %s, want 1: %+v", n, h.IP, d.ProcInfos)
		}
	}

	v2 = multi(1, p.spec()).v2
	wantCodes(t, "stop by agent id", v2, gseSuccess, known...)
	for i, h := range hosts {
		controlOf(t, known[i], v2[known[i]])
		if hostAlive(h, pids[i]) {
			t.Fatalf("after stop, pid %d still runs on %s", pids[i], h.IP)
		}
	}
}
