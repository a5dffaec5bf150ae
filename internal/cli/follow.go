package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// followInterval is how often --follow looks for new events.
const followInterval = 2 * time.Second

// eventWriter prints events as a table or as JSON lines. A one-shot table
// is aligned as a whole; a followed one cannot wait for its last row, so
// its columns have fixed widths.
type eventWriter struct {
	w           io.Writer
	json        bool
	fixed       bool
	wroteHeader bool
}

const fixedEventRow = "%-20s  %-16s  %-24s  %-29s  %7s  %s\n"

func (ew *eventWriter) write(evs []workflows.Event) error {
	if ew.json {
		for _, ev := range evs {
			if err := printJSONLine(ew.w, ev); err != nil {
				return err
			}
		}
		return nil
	}
	row := func(w io.Writer, cells ...any) {
		if ew.fixed {
			fmt.Fprintf(w, fixedEventRow, cells...)
		} else {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", cells...)
		}
	}
	var w io.Writer = ew.w
	var tw *tabwriter.Writer
	if !ew.fixed {
		tw = tabwriter.NewWriter(ew.w, 0, 4, 2, ' ', 0)
		w = tw
	}
	if !ew.wroteHeader {
		row(w, "TIME", "HOST", "PROCESS", "KIND", "PID", "DETAIL")
		ew.wroteHeader = true
	}
	for _, ev := range evs {
		row(w, ev.Time.UTC().Format(time.RFC3339), ev.Host.String(), ev.Process.Namespace+"/"+ev.Process.Name, ev.Kind,
			strconv.Itoa(ev.Pid), ev.Detail)
	}
	if tw != nil {
		return tw.Flush()
	}
	return nil
}

// follow prints events newer than those already shown until ctx ends.
// Each round is one listing of the host workflows: a host's memo carries
// its newest event, so only hosts with something new are queried.
func follow(ctx context.Context, c client.Client, dc converter.DataConverter, selected map[proc.HostID]bool,
	shown []workflows.Event, f eventFlags, ew *eventWriter) error {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	// What the first query returned was shown (or filtered out); anything
	// a host records later is new.
	last := map[proc.HostID]time.Time{}
	for _, ev := range shown {
		if ev.Time.After(last[ev.Host]) {
			last[ev.Host] = ev.Time
		}
	}
	tick := time.NewTicker(followInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		newest, err := newestEvents(ctx, c, dc, selected)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		for h, t := range newest {
			if !t.After(last[h]) {
				continue
			}
			var evs []workflows.Event
			if _, err := engine.QueryOpen(ctx, c, workflows.HostWorkflowID(h), workflows.EventsQuery, &evs); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("events: %w", err)
			}
			var fresh []workflows.Event
			for _, ev := range evs {
				if ev.Time.After(last[h]) {
					fresh = append(fresh, ev)
				}
			}
			last[h] = t
			if err := ew.write(filterEvents(fresh, f, time.Now())); err != nil {
				return err
			}
		}
	}
}

// newestEvents lists the running host workflows and the time of each one's
// newest event, from its memo.
func newestEvents(ctx context.Context, c client.Client, dc converter.DataConverter, selected map[proc.HostID]bool) (map[proc.HostID]time.Time, error) {
	q := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.HostWorkflowName)
	out := map[proc.HostID]time.Time{}
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list host workflows: %w", err)
		}
		for _, ex := range resp.Executions {
			p := ex.GetMemo().GetFields()[workflows.LastEventMemo]
			var ev workflows.Event
			if p == nil || dc.FromPayload(p, &ev) != nil || !selected[ev.Host] {
				continue
			}
			out[ev.Host] = ev.Time
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return out, nil
		}
	}
}
