package testbed

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
)

// TestStartCluster: a cluster on PostgreSQL answers in namespace default,
// kept a day, with the search attributes asked for, serves the metrics the
// bench reads under the dev server's names, and leaves nothing running or
// on disk after Stop. It needs bin/temporal-server, bin/temporal-sql-tool
// and PostgreSQL (make cluster-deps); it runs with DROVER_CLUSTER_TEST=1.
func TestStartCluster(t *testing.T) {
	if os.Getenv("DROVER_CLUSTER_TEST") == "" {
		t.Skip("DROVER_CLUSTER_TEST=1 runs it (needs make bin/temporal-server bin/temporal-sql-tool cluster-deps)")
	}
	metricsPort, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	c, err := StartCluster(ClusterOptions{Shards: 4, MetricsPort: metricsPort,
		SearchAttributes: map[string]string{"DroverOp": "Keyword", "DroverHosts": "KeywordList", "DroverHostCount": "Int"}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()
	cl, err := client.Dial(client.Options{HostPort: c.Address, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := cl.WorkflowService().DescribeNamespace(ctx, describeDefault())
	if err != nil {
		t.Fatal(err)
	}
	if got := ns.Config.WorkflowExecutionRetentionTtl.AsDuration(); got != 24*time.Hour {
		t.Errorf("retention %s, want 24h", got)
	}
	sa, err := cl.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"DroverOp", "DroverHosts", "DroverHostCount"} {
		if _, ok := sa.CustomAttributes[name]; !ok {
			t.Errorf("search attribute %s missing: %v", name, sa.CustomAttributes)
		}
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{`persistence_requests{namespace="default",operation="CreateNamespace"`, `service_requests{`} {
		if !strings.Contains(string(body), series) {
			t.Errorf("metrics lack %s", series)
		}
	}
	dir := c.Dir
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left after Stop: %v", dir, err)
	}
	if !c.server.exited() || !c.pg.exited() {
		t.Error("server or postgres still running after Stop")
	}
}
