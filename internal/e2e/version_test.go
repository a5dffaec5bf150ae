package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/drover-sh/drover/internal/version"
)

// A worker names its build to Temporal: its pollers' identity carries the
// version and commit, so an upgrade shows which workers still run the old
// build.
func TestWorkerIdentityNamesItsBuild(t *testing.T) {
	e := newEnv(t, 1)
	e.startWorker()
	want := " drover-worker " + version.Get().Short()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ids []string
	waitFor(t, 30*time.Second, "the worker's pollers", func() bool {
		resp, err := e.client.DescribeTaskQueue(ctx, e.cfg.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err != nil {
			return false
		}
		ids = ids[:0]
		for _, p := range resp.Pollers {
			ids = append(ids, p.Identity)
		}
		return len(ids) > 0
	})
	for _, id := range ids {
		if !strings.Contains(id, want) {
			t.Fatalf("poller identity %q lacks %q", id, want)
		}
	}
}
