package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// scrapeMetrics reads a Prometheus /metrics page (a worker's or the dev
// server's) as series name{labels} → value.
func scrapeMetrics(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}

// label is a series' value of one label, or "".
func label(series, name string) string {
	_, rest, ok := strings.Cut(series, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// serverSnapshot is one reading of the dev server's counters; nil when its
// metrics are not served.
type serverSnapshot map[string]float64

func (e *env) serverSnapshot() serverSnapshot {
	if e.metricsPort == 0 {
		return nil
	}
	m, err := scrapeMetrics(fmt.Sprintf("127.0.0.1:%d", e.metricsPort))
	if err != nil {
		return nil
	}
	return m
}

// The engine's persistence writes a host op costs: the execution and task
// writes of drover's namespace, and the completions of the tasks those
// writes made: a task queue's (matching's CompleteTasksLessThan) and a
// history shard's, one queue at a time (RangeCompleteTransferTasks,
// ...TimerTasks, ...VisibilityTasks, ...OutboundTasks, ...ReplicationTasks)
// or one task (CompleteHistoryTask).
var executionWrites = []string{"CreateWorkflowExecution", "UpdateWorkflowExecution", "ConflictResolveWorkflowExecution",
	"AppendHistoryNodes", "CreateTasks"}

const completionWrites = "CompleteTasksLessThan, RangeComplete…Tasks, CompleteHistoryTask"

func isCompletion(op string) bool {
	return op == "CompleteTasksLessThan" || op == "CompleteHistoryTask" ||
		strings.HasPrefix(op, "RangeComplete") && strings.HasSuffix(op, "Tasks")
}

// engineUse is what the dev server did between two snapshots.
type engineUse struct {
	// Requests are the frontend requests in drover's namespace by
	// operation; Own the server's own (its system namespaces'
	// housekeeping workers), which no client sends. The history and
	// matching services count each request again as they pass it on;
	// those are not requests to the server.
	Requests, Own map[string]float64
	// Writes are the counted persistence writes by operation (see
	// executionWrites); Visibility the visibility store's requests by
	// operation, counted apart.
	Writes, Visibility map[string]float64
}

// usedBetween is the server's work in namespace ns from a to b. A task
// completion counts in ns, and also when the server labels it with no
// namespace of a client's (a history shard's range completion acknowledges
// every namespace's tasks at once; on the bench's dev server the only
// other namespace is the server's own, whose few housekeeping tasks are
// counted with drover's).
func usedBetween(a, b serverSnapshot, ns string) engineUse {
	u := engineUse{Requests: map[string]float64{}, Own: map[string]float64{}, Writes: map[string]float64{}, Visibility: map[string]float64{}}
	if b == nil {
		return u
	}
	for k, v := range b {
		d := v - a[k]
		if d <= 0 {
			continue
		}
		name, _, _ := strings.Cut(k, "{")
		op, lns := label(k, "operation"), label(k, "namespace")
		switch {
		case op == "":
		case name == "service_requests" && label(k, "service_name") == "frontend":
			if lns == ns {
				u.Requests[op] += d
			} else {
				u.Own[op] += d
			}
		case name == "persistence_requests" && lns == ns && slices.Contains(executionWrites, op),
			name == "persistence_requests" && isCompletion(op) && (lns == ns || !clientNamespace(lns)):
			u.Writes[op] += d
		case name == "visibility_persistence_requests":
			u.Visibility[op] += d
		}
	}
	return u
}

// clientNamespace reports whether a namespace label names one a client
// could use, not the server's own or none.
func clientNamespace(ns string) bool {
	switch ns {
	case "", "system", "temporal_system", "_unknown_", "all":
		return false
	}
	return true
}

func total(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// perOp lists m's operations, largest first, each divided by n: "A 2.0,
// B 1.5".
func perOp(m map[string]float64, n float64, limit int) string {
	type kv struct {
		k string
		v float64
	}
	var xs []kv
	for k, v := range m {
		xs = append(xs, kv{k, v})
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].v > xs[j].v || xs[i].v == xs[j].v && xs[i].k < xs[j].k })
	var out []string
	for i, x := range xs {
		if i == limit {
			break
		}
		out = append(out, fmt.Sprintf("%s %.2f", x.k, x.v/n))
	}
	return strings.Join(out, ", ")
}
