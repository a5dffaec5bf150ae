package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// TestSupervisionMovesToShards: a host workflow supervised by a watch of
// its own (a worker with watch_shards 0 runs hosts as releases before
// shards did) carries on under a worker with shards. It keeps its own
// watch until its next request, then arms its shard, and a process killed
// after that is started again by the shard's watch, once.
func TestSupervisionMovesToShards(t *testing.T) {
	e := newEnv(t, 1)
	h := e.bed.Hosts[0]
	installApp(t, h, "app")
	e.cfg.WatchShards = 0
	e.startWorker()
	it, pid := e.supervised(t, h, nil)
	if _, err := h.Exec(fmt.Sprintf("kill -9 %d", pid)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "restarted by the host's own watch", liveNewPid(t, h, pid))
	hostID := workflows.HostWorkflowID(proc.HostID{IP: h.IP})
	shardID := workflows.ShardWorkflowID(e.cfg.WatchQueue(), hostID, 4)
	if members := e.shardMembers(t, shardID); members != nil {
		t.Fatalf("a shard runs without watch_shards: %+v", members)
	}

	e.worker.Stop()
	e.cfg.WatchShards = 4
	e.startWorker()
	// Any request brings the worker's supervision settings: manage it again.
	wantCode(t, "manage", e.op(proc.OpRegister, it), proc.CodeSuccess)
	waitFor(t, 30*time.Second, "the host armed on its shard", func() bool {
		for _, m := range e.shardMembers(t, shardID) {
			if m == hostID {
				return true
			}
		}
		return false
	})
	pid = hostPid(t, h, "/data/app/svc.pid")
	if _, err := h.Exec(fmt.Sprintf("kill -9 %d", pid)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "restarted by the shard's watch", liveNewPid(t, h, pid))
	time.Sleep(3 * e.cfg.SuperviseInterval)
	if out, _ := h.Exec("grep -c start /data/app/starts.log"); strings.TrimSpace(out) != "3" {
		t.Fatalf("started %s times, want 3 (the start and two restarts)", strings.TrimSpace(out))
	}
}

// shardMembers lists a shard's member hosts; nil when it is not running.
func (e *env) shardMembers(t *testing.T, id string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var st workflows.ShardState
	found, err := engine.QueryOpen(ctx, e.client, id, workflows.ShardMembersQuery, &st)
	if err != nil {
		t.Fatalf("members of %s: %v", id, err)
	}
	if !found {
		return nil
	}
	out := []string{}
	for _, m := range st.Members {
		out = append(out, m.Host)
	}
	return out
}
