package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// planEntry is what one item of a task would do.
type planEntry struct {
	Key     string
	Process proc.ProcessID
	Plan    activities.HostPlan
	// Spec is the spec the task would register, for ops that carry one.
	Spec *proc.Spec
	// Unresolved is why the item names no inventory host, or "".
	Unresolved string
}

// registryReader returns the spec registered for p on host h; nil when none
// is registered.
type registryReader func(ctx context.Context, h proc.HostID, p proc.ProcessID) (*proc.Spec, error)

// planTask works out what task would do on each of its hosts. It only
// reads: the inventory, and registries for items without an inline spec.
func planTask(ctx context.Context, task *gseapi.Task, inv *inventory.Inventory, read registryReader) ([]planEntry, error) {
	out := make([]planEntry, 0, len(task.Items))
	for _, it := range task.Items {
		e := planEntry{Key: it.Key(), Process: it.Process}
		t := it.Target
		if !t.Resolved() {
			if h, ok := inv.ByAgentID(t.AgentID); ok {
				t.CloudID, t.IP = h.CloudID, h.IP
				e.Key = proc.ResultKey(proc.Target{CloudID: h.CloudID, SupplierID: h.SupplierID, IP: h.IP}, it.Process)
			} else {
				e.Unresolved = fmt.Sprintf("agent id %q is not in the inventory (%d)", t.AgentID, proc.CodeUnknownHost)
				out = append(out, e)
				continue
			}
		}
		host, ok := inv.Lookup(t.HostID())
		if !ok {
			e.Unresolved = fmt.Sprintf("host bk_cloud_id=%d ip=%s is not in the inventory (%d)", t.CloudID, t.IP, proc.CodeUnknownHost)
			out = append(out, e)
			continue
		}
		spec := it.Spec
		switch {
		case task.Op == proc.OpSpecRegister || task.Op == proc.OpSpecUpdate || (spec != nil && !task.Op.IsSpecOp()):
			e.Spec = spec // registered (or replaced) before anything runs
		case spec == nil && task.Op != proc.OpSpecUnregister:
			got, err := read(ctx, host.ID(), it.Process)
			if err != nil {
				return nil, err
			}
			spec = got
		}
		if spec == nil && !task.Op.IsSpecOp() {
			e.Plan = activities.HostPlan{Refused: fmt.Sprintf("process %s/%s is not registered on this host (%d)",
				it.Process.Namespace, it.Process.Name, proc.CodeNotRegistered)}
		} else {
			var s proc.Spec
			if spec != nil {
				s = *spec
			}
			e.Plan = activities.Plan(host, task.Op, s)
		}
		out = append(out, e)
	}
	return out, nil
}

// printPlan prints entries grouped by what they would do, like a
// terraform plan: each group once with its hosts, then the counts.
func printPlan(w io.Writer, task *gseapi.Task, entries []planEntry, unresolvedTerms []string) error {
	type group struct {
		sample planEntry
		keys   []string
	}
	var groups []*group
	byShape := map[string]*group{}
	var unresolved []planEntry
	refused, acting := 0, 0
	for _, e := range entries {
		if e.Unresolved != "" {
			unresolved = append(unresolved, e)
			continue
		}
		if e.Plan.Refused != "" {
			refused++
		} else {
			acting++
		}
		shape, _ := json.Marshal(struct {
			P proc.ProcessID
			H activities.HostPlan
			S *proc.Spec
		}{e.Process, e.Plan, e.Spec})
		g, ok := byShape[string(shape)]
		if !ok {
			g = &group{sample: e}
			byShape[string(shape)] = g
			groups = append(groups, g)
		}
		g.keys = append(g.keys, e.Key)
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, "drover plan: %s %s (op_type %d)\n", task.API, task.Op, int(task.Op))
	for _, g := range groups {
		e := g.sample
		mark := "~"
		if e.Plan.Refused != "" {
			mark = "!"
		}
		fmt.Fprintf(b, "\n  %s %s/%s on %s:\n", mark, e.Process.Namespace, e.Process.Name, hostCount(len(g.keys)))
		for _, k := range g.keys {
			fmt.Fprintf(b, "      %s\n", k)
		}
		if e.Plan.Refused != "" {
			fmt.Fprintf(b, "      would fail before any command: %s\n", e.Plan.Refused)
			continue
		}
		if e.Spec != nil {
			spec, _ := json.Marshal(e.Spec)
			fmt.Fprintf(b, "      %-9s %s\n", "register", spec)
		}
		fmt.Fprintf(b, "      %-9s %s\n", "as", e.Plan.RunsAs)
		for _, s := range e.Plan.Steps {
			fmt.Fprintf(b, "      %-9s %s\n", s.What, s.Detail)
		}
	}
	if len(unresolved)+len(unresolvedTerms) > 0 {
		fmt.Fprintf(b, "\n  ? could not resolve %s:\n", countOf(len(unresolved)+len(unresolvedTerms), "selector term or host", "selector terms or hosts"))
		for _, t := range unresolvedTerms {
			fmt.Fprintf(b, "      %s\n", t)
		}
		sort.Slice(unresolved, func(i, j int) bool { return unresolved[i].Key < unresolved[j].Key })
		for _, e := range unresolved {
			fmt.Fprintf(b, "      %s: %s\n", e.Key, e.Unresolved)
		}
	}
	fmt.Fprintf(b, "\nPlan: %d to %s, %d would fail, %d unresolved. Nothing was changed on any host.\n",
		acting, task.Op, refused, len(unresolved)+len(unresolvedTerms))
	_, err := io.WriteString(w, b.String())
	return err
}

func hostCount(n int) string { return countOf(n, "host", "hosts") }

func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// selectEach resolves a host selector term by term: the hosts the terms
// picked, in inventory order, and each term that picked none with why.
func selectEach(inv *inventory.Inventory, selector string) ([]inventory.Host, []string) {
	var picked []inventory.Host
	seen := map[proc.HostID]bool{}
	var unresolved []string
	for _, term := range strings.Split(selector, ",") {
		if term = strings.TrimSpace(term); term == "" {
			continue
		}
		hosts, err := inv.Select(term)
		if err != nil {
			unresolved = append(unresolved, err.Error())
			continue
		}
		for _, h := range hosts {
			if !seen[h.ID()] {
				seen[h.ID()] = true
				picked = append(picked, h)
			}
		}
	}
	order := map[proc.HostID]int{}
	for i, h := range inv.Hosts() {
		order[h.ID()] = i
	}
	sort.SliceStable(picked, func(i, j int) bool { return order[picked[i].ID()] < order[picked[j].ID()] })
	return picked, unresolved
}

// queryRegistry reads registered specs from host workflows with c, once
// per host.
func queryRegistry(c func() (client.Client, error)) registryReader {
	cache := map[proc.HostID][]workflows.Entry{}
	return func(ctx context.Context, h proc.HostID, p proc.ProcessID) (*proc.Spec, error) {
		entries, ok := cache[h]
		if !ok {
			cl, err := c()
			if err != nil {
				return nil, err
			}
			if _, err := engine.QueryOpen(ctx, cl, workflows.HostWorkflowID(h), workflows.RegistryQuery, &entries); err != nil {
				return nil, &ExitError{Code: ExitUnavailable, Err: fmt.Errorf("read the registry of %s: %w", h, err)}
			}
			cache[h] = entries
		}
		for _, e := range entries {
			if e.Process == p {
				s := e.Spec
				return &s, nil
			}
		}
		return nil, nil
	}
}

// lazyClient dials Temporal on first use only: a plan whose items all
// carry their spec needs no server.
type lazyClient struct {
	cfg config.Config
	c   client.Client
}

func (l *lazyClient) get() (client.Client, error) {
	if l.c == nil {
		c, err := dial(l.cfg)
		if err != nil {
			return nil, err
		}
		l.c = c
	}
	return l.c, nil
}

func (l *lazyClient) Close() {
	if l.c != nil {
		l.c.Close()
	}
}

// runPlan prints the plan of task; it starts nothing.
func runPlan(ctx context.Context, w io.Writer, cfg config.Config, task *gseapi.Task, inv *inventory.Inventory, unresolvedTerms []string) error {
	lc := &lazyClient{cfg: cfg}
	defer lc.Close()
	entries, err := planTask(ctx, task, inv, queryRegistry(lc.get))
	if err != nil {
		return err
	}
	return printPlan(w, task, entries, unresolvedTerms)
}

// planAPI prints the plan of an API request body.
func planAPI(ctx context.Context, cmd *cobra.Command, cfg config.Config, name string, body []byte) error {
	task, err := gseapi.DecodeTask(name, body)
	if err != nil {
		return reject(cmd, err)
	}
	inv, err := loadInventory(cfg)
	if err != nil {
		return err
	}
	return runPlan(ctx, cmd.OutOrStdout(), cfg, task, inv, nil)
}
