package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/drover-sh/drover/proc"
)

// writesTarget is the most persistence writes a host op may cost the
// engine.
const writesTarget = 4

// writesOps are the op types the writes table has rows for, in order.
var writesOps = []string{"register", "start", "status", "restart", "stop"}

// writesColumn is one column of the engine-writes table: per op type, the
// engine's work summed over its runs and the host ops those runs asked
// for.
type writesColumn struct {
	head string
	use  map[string]engineUse
	ops  map[string]int
}

func newWritesColumn(head string) *writesColumn {
	return &writesColumn{head: head, use: map[string]engineUse{}, ops: map[string]int{}}
}

// add counts one run of op: the engine's work u for hostOps host ops.
func (c *writesColumn) add(op string, u engineUse, hostOps int) {
	if u.Writes == nil || hostOps == 0 {
		return // the server's metrics were not read
	}
	sum, ok := c.use[op]
	if !ok {
		sum = engineUse{Writes: map[string]float64{}, Visibility: map[string]float64{}}
	}
	for k, v := range u.Writes {
		sum.Writes[k] += v
	}
	for k, v := range u.Visibility {
		sum.Visibility[k] += v
	}
	c.use[op] = sum
	c.ops[op] += hostOps
}

// perHostOp is op's writes per host op, and false when op was not run.
func (c *writesColumn) perHostOp(op string) (float64, bool) {
	if c.ops[op] == 0 {
		return 0, false
	}
	return total(c.use[op].Writes) / float64(c.ops[op]), true
}

// writesMarkdown renders the engine's persistence writes per host op by op
// type, each column against the target, and what they were; window says
// until when after an op's answer its writes were counted.
func writesMarkdown(b *strings.Builder, heading, window string, cols []*writesColumn) {
	w := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	w("%s\n\n| op |", heading)
	for _, c := range cols {
		w(" %s: writes | visibility |", c.head)
	}
	w(" target | |\n|---|")
	for range cols {
		w("---|---|")
	}
	w("---|---|\n")
	for _, op := range writesOps {
		w("| %s |", op)
		met, any := true, false
		for _, c := range cols {
			x, ok := c.perHostOp(op)
			if !ok {
				w(" - | - |")
				continue
			}
			any = true
			met = met && x <= writesTarget
			w(" %.2f | %.2f |", x, total(c.use[op].Visibility)/float64(c.ops[op]))
		}
		if any {
			w(" ≤ %d | %s |\n", writesTarget, verdict(met))
		} else {
			w(" ≤ %d | not measured |\n", writesTarget)
		}
	}
	w("\nWrites are the server's own count (`persistence_requests`) of %s in drover's namespace, and the task completions (%s: a matching queue's carry drover's namespace, a history shard's range completions none, and are counted too: on the bench's server no one else's tasks are in them), from just before the op's request to %s, divided by the host ops asked for. Visibility is `visibility_persistence_requests`, apart.\n\n",
		strings.Join(executionWrites, ", "), completionWrites, window)
	for _, c := range cols {
		var lines []string
		for _, op := range writesOps {
			if c.ops[op] > 0 {
				lines = append(lines, fmt.Sprintf("%s: %s", op, perOp(c.use[op].Writes, float64(c.ops[op]), 6)))
			}
		}
		if len(lines) > 0 {
			w("By operation, per host op (%s): %s.\n\n", c.head, strings.Join(lines, "; "))
		}
	}
}

// sortedCodes is codes' keys, success first.
func sortedCodes(codes map[proc.Code]int) []proc.Code {
	out := make([]proc.Code, 0, len(codes))
	for c := range codes {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
