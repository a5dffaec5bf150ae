package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// fleetClient lists host workflows from memory and answers registry and
// events queries, counting both.
type fleetClient struct {
	client.Client
	execs                   []*workflowpb.WorkflowExecutionInfo
	lists, queries, signals atomic.Int64
}

func (f *fleetClient) SignalWorkflow(_ context.Context, id, _, name string, _ any) error {
	if name != workflows.RenewSignal || id == "" {
		return fmt.Errorf("signal %q to %q", name, id)
	}
	f.signals.Add(1)
	return nil
}

func (f *fleetClient) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.lists.Add(1)
	start, _ := strconv.Atoi(string(req.NextPageToken))
	end := min(start+int(req.PageSize), len(f.execs))
	resp := &workflowservice.ListWorkflowExecutionsResponse{Executions: f.execs[start:end]}
	if end < len(f.execs) {
		resp.NextPageToken = []byte(strconv.Itoa(end))
	}
	return resp, nil
}

func (f *fleetClient) QueryWorkflowWithOptions(_ context.Context, req *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	f.queries.Add(1)
	var v any = []workflows.Event{}
	if req.QueryType == workflows.RegistryQuery {
		v = []workflows.Entry{{Process: proc.ProcessID{Namespace: "old", Name: "svc"}, Registration: proc.Registration{Expected: true}}}
	}
	b, _ := json.Marshal(v)
	return &client.QueryWorkflowWithOptionsResponse{QueryResult: jsonValue(b)}, nil
}

type jsonValue []byte

func (j jsonValue) HasValue() bool    { return len(j) > 0 }
func (j jsonValue) Get(ptr any) error { return json.Unmarshal(j, ptr) }

// TestListDigestsAtFleetSize reads 10,000 hosts: ten listing pages and no
// query, except for the hosts whose run has no digest in its memo. Runs
// without the digest or the specs are asked for a new run.
func TestListDigestsAtFleetSize(t *testing.T) {
	const hosts, withoutMemo, withoutSpecs = 10000, 3, 2
	dc := converter.GetDefaultDataConverter()
	f := &fleetClient{}
	for i := 0; i < hosts; i++ {
		id := proc.HostID{CloudID: i % 3, IP: fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)}
		info := &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: workflows.HostWorkflowID(id)}}
		if i >= withoutMemo {
			p, err := dc.ToPayload(workflows.Digest{Procs: []workflows.ProcDigest{{Namespace: "web", Name: "svc", Managed: true, Expected: true, Actual: workflows.StateRunning}}})
			if err != nil {
				t.Fatal(err)
			}
			info.Memo = &commonpb.Memo{Fields: map[string]*commonpb.Payload{workflows.RegistryMemo: p}}
			if i >= withoutMemo+withoutSpecs {
				specs, err := dc.ToPayload([]workflows.RegistryEntry{{Process: proc.ProcessID{Namespace: "web", Name: "svc"}}})
				if err != nil {
					t.Fatal(err)
				}
				info.Memo.Fields[workflows.SpecsMemo] = specs
			}
		}
		f.execs = append(f.execs, info)
	}
	began := time.Now()
	got, err := ListDigests(context.Background(), f, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d hosts in %s", len(got), time.Since(began))
	if len(got) != hosts || f.lists.Load() != hosts/listPageSize || f.queries.Load() != 2*withoutMemo {
		t.Fatalf("%d digests, %d listings, %d queries", len(got), f.lists.Load(), f.queries.Load())
	}
	old := 0
	for _, hd := range got {
		if len(hd.Digest.Procs) == 1 && hd.Digest.Procs[0].Namespace == "old" {
			old++
		}
	}
	if old != withoutMemo {
		t.Fatalf("%d hosts read from their registry, want %d", old, withoutMemo)
	}
	// The runs without a digest or specs, and only they, are asked for a
	// new run.
	if n, err := RenewHosts(context.Background(), f, "", false); err != nil || n != withoutMemo+withoutSpecs || f.signals.Load() != withoutMemo+withoutSpecs {
		t.Fatalf("renewed %d, signalled %d: %v", n, f.signals.Load(), err)
	}
	// Asked to, every one.
	if n, err := RenewHosts(context.Background(), f, "", true); err != nil || n != hosts {
		t.Fatalf("renewed %d of all %d: %v", n, hosts, err)
	}
	// A selection reads the same listing and keeps its hosts.
	got, err = ListDigests(context.Background(), f, nil, "", func(h proc.HostID) bool { return h.CloudID == 1 })
	if err != nil || len(got) != hosts/3 {
		t.Fatalf("cloud 1: %d digests, %v", len(got), err)
	}
}

// TestRunningHostsOfAQueue: a deployment lists the host workflows its own
// task queue runs; a quote in a queue's name cannot end the query's string.
func TestRunningHostsOfAQueue(t *testing.T) {
	for _, tc := range []struct{ queue, want string }{
		{"", "WorkflowType = 'Host' AND ExecutionStatus = 'Running'"},
		{"drover", "WorkflowType = 'Host' AND ExecutionStatus = 'Running' AND TaskQueue = 'drover'"},
		{"a'b", "WorkflowType = 'Host' AND ExecutionStatus = 'Running' AND TaskQueue = 'a''b'"},
	} {
		if got := RunningHosts(tc.queue); got != tc.want {
			t.Errorf("RunningHosts(%q) = %q, want %q", tc.queue, got, tc.want)
		}
	}
}
