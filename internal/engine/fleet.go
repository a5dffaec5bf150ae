package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/errgroup"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// HostDigest is one host's registry digest, as the fleet listing read it.
type HostDigest struct {
	Host   proc.HostID
	Digest workflows.Digest
}

// listPageSize is the host workflows one listing page asks for: a fleet of
// 10,000 hosts is ten round trips.
const listPageSize = 1000

// fallbackParallel bounds the registry queries for hosts without a memo.
const fallbackParallel = 32

// ListDigests reads the registry digest of every running host workflow on
// queue that keep accepts, with one paged listing: each listed workflow carries its
// memo. Host workflows whose memo lacks the digest (a run begun before the
// memo existed, or a host with more processes than the memo holds) are
// read with registry and events queries instead, and only they. dc decodes
// the memos; nil means the default converter.
func ListDigests(ctx context.Context, c client.Client, dc converter.DataConverter, queue string, keep func(proc.HostID) bool) ([]HostDigest, error) {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var out []HostDigest
	var ask []proc.HostID
	err := eachHost(ctx, c, RunningHosts(queue), listPageSize, func(host proc.HostID, ex *workflowpb.WorkflowExecutionInfo) error {
		if keep != nil && !keep(host) {
			return nil
		}
		var d workflows.Digest
		p := ex.GetMemo().GetFields()[workflows.RegistryMemo]
		if p == nil || dc.FromPayload(p, &d) != nil || d.Omitted > 0 {
			ask = append(ask, host)
			return nil
		}
		out = append(out, HostDigest{Host: host, Digest: d})
		return nil
	})
	if err != nil {
		return nil, err
	}
	asked, err := queryDigests(ctx, c, ask)
	if err != nil {
		return nil, err
	}
	out = append(out, asked...)
	sort.Slice(out, func(i, j int) bool { return out[i].Host.String() < out[j].Host.String() })
	return out, nil
}

// queryDigests builds the digests of hosts from their registry and events
// queries.
func queryDigests(ctx context.Context, c client.Client, hosts []proc.HostID) ([]HostDigest, error) {
	var mu sync.Mutex
	var out []HostDigest
	var g errgroup.Group
	g.SetLimit(fallbackParallel)
	for _, h := range hosts {
		g.Go(func() error {
			var entries []workflows.Entry
			var events []workflows.Event
			id := workflows.HostWorkflowID(h)
			found, err := QueryOpen(ctx, c, id, workflows.RegistryQuery, &entries)
			if err == nil && found {
				_, err = QueryOpen(ctx, c, id, workflows.EventsQuery, &events)
			}
			if err != nil {
				return fmt.Errorf("read the registry: %w", err)
			}
			if found {
				d := workflows.DigestOf(entries, events, time.Now())
				d.Procs, d.Omitted = digestAll(entries, events), 0
				mu.Lock()
				out = append(out, HostDigest{Host: h, Digest: d})
				mu.Unlock()
			}
			return nil
		})
	}
	err := g.Wait()
	return out, err
}

// digestAll is DigestOf without the memo's bound on processes: read from
// the registry itself, every process is listed.
func digestAll(entries []workflows.Entry, events []workflows.Event) []workflows.ProcDigest {
	var procs []workflows.ProcDigest
	for start := 0; start < len(entries); start += workflows.MaxDigestProcs {
		end := min(start+workflows.MaxDigestProcs, len(entries))
		procs = append(procs, workflows.DigestOf(entries[start:end], events, time.Now()).Procs...)
	}
	return procs
}

// RenewHosts asks running host workflows on queue for a new run: those whose memo
// lacks the registry digest or the specs (a run begun before they existed;
// until then ListDigests and status read such a host with queries), or
// with all, every one (a new run takes every change its worker has, which
// retiring a change's old branch needs). It returns how many it asked.
func RenewHosts(ctx context.Context, c client.Client, queue string, all bool) (int, error) {
	asked := 0
	err := eachHost(ctx, c, RunningHosts(queue), listPageSize, func(_ proc.HostID, ex *workflowpb.WorkflowExecutionInfo) error {
		memo := ex.GetMemo().GetFields()
		if !all && memo[workflows.RegistryMemo] != nil && memo[workflows.SpecsMemo] != nil {
			return nil
		}
		run := ex.GetExecution()
		if err := c.SignalWorkflow(ctx, run.GetWorkflowId(), run.GetRunId(), workflows.RenewSignal, nil); err != nil {
			return fmt.Errorf("renew %s: %w", run.GetWorkflowId(), err)
		}
		asked++
		return nil
	})
	return asked, err
}

// RunningHosts is the listing query of every running host workflow on a
// task queue: a deployment's hosts are those its workers run, and another
// deployment in the namespace lists its own. An empty queue lists all.
func RunningHosts(queue string) string {
	q := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.HostWorkflowName)
	if queue != "" {
		q += fmt.Sprintf(" AND TaskQueue = '%s'", strings.ReplaceAll(queue, "'", "''"))
	}
	return q
}

// eachHost pages through the host workflows query q finds, pageSize a
// page, calling each with every one's host; an error from each ends it.
func eachHost(ctx context.Context, c client.Client, q string, pageSize int, each func(proc.HostID, *workflowpb.WorkflowExecutionInfo) error) error {
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: int32(pageSize), NextPageToken: token})
		if err != nil {
			return fmt.Errorf("list host workflows: %w", err)
		}
		for _, ex := range resp.Executions {
			if h, ok := workflows.ParseHostWorkflowID(ex.GetExecution().GetWorkflowId()); ok {
				if err := each(h, ex); err != nil {
					return err
				}
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return nil
		}
	}
}

// ScanRegistries pages through the host workflows query q finds, calling
// each with a host's registry from its specs memo; ok is false for a
// host whose memo has none.
func ScanRegistries(ctx context.Context, c client.Client, dc converter.DataConverter, q string, pageSize int, each func(proc.HostID, []workflows.Entry, bool)) error {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	return eachHost(ctx, c, q, pageSize, func(h proc.HostID, ex *workflowpb.WorkflowExecutionInfo) error {
		var reg []workflows.RegistryEntry
		p := ex.GetMemo().GetFields()[workflows.SpecsMemo]
		if p == nil || dc.FromPayload(p, &reg) != nil {
			each(h, nil, false)
			return nil
		}
		entries := make([]workflows.Entry, len(reg))
		for i, r := range reg {
			entries[i] = workflows.Entry{Process: r.Process, Spec: r.Spec, SupplierID: r.SupplierID, Registration: r.Registration}
		}
		each(h, entries, true)
		return nil
	})
}
