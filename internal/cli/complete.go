package cli

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// completionTimeout bounds a completion's read of the registry: a shell
// waiting on a Tab must not hang on an unreachable Temporal.
const completionTimeout = 3 * time.Second

// completeProcessFlags adds dynamic completion of --hosts from the
// inventory, and of --namespace and --name from the registry (the host
// workflows' memos, one listing), to a command that has them.
func completeProcessFlags(cmd *cobra.Command) {
	if cmd.Flags().Lookup("hosts") != nil {
		_ = cmd.RegisterFlagCompletionFunc("hosts", completeHosts)
	}
	if cmd.Flags().Lookup("namespace") != nil {
		_ = cmd.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
			return registered(cmd, func(p workflows.ProcDigest) string { return p.Namespace }), cobra.ShellCompDirectiveNoFileComp
		})
	}
	if cmd.Flags().Lookup("name") != nil {
		_ = cmd.RegisterFlagCompletionFunc("name", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
			ns, _ := cmd.Flags().GetString("namespace")
			return registered(cmd, func(p workflows.ProcDigest) string {
				if ns != "" && p.Namespace != ns {
					return ""
				}
				return p.Name
			}), cobra.ShellCompDirectiveNoFileComp
		})
	}
}

// completeHosts offers the last term of a comma-separated selector: all,
// group names, ips, agent ids and the explicit forms.
func completeHosts(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	cfg, err := config.Load(cmd.Flags())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	inv, err := inventory.Load(cfg.Inventory)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	done := ""
	if i := strings.LastIndex(toComplete, ","); i >= 0 {
		done = toComplete[:i+1]
	}
	terms := map[string]bool{"all": true}
	for _, g := range inv.Groups() {
		terms[g], terms["group:"+g] = true, true
	}
	for _, h := range inv.Hosts() {
		terms[h.IP], terms[h.ID().String()] = true, true
		if h.AgentID != "" {
			terms[h.AgentID], terms["agent:"+h.AgentID] = true, true
		}
		for k, v := range h.Labels {
			terms["label:"+k+"="+v] = true
		}
	}
	var out []string
	for t := range terms {
		if strings.HasPrefix(done+t, toComplete) {
			out = append(out, done+t)
		}
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// registered lists the distinct non-empty values of pick over the
// registered processes of the selected hosts; nothing when Temporal cannot
// be reached in time.
func registered(cmd *cobra.Command, pick func(workflows.ProcDigest) string) []string {
	cfg, err := config.Load(cmd.Flags())
	if err != nil {
		return nil
	}
	var keep func(proc.HostID) bool
	if sel, _ := cmd.Flags().GetString("hosts"); sel != "" && sel != "all" {
		if inv, err := inventory.Load(cfg.Inventory); err == nil {
			if hosts, err := inv.Select(sel); err == nil {
				in := map[proc.HostID]bool{}
				for _, h := range hosts {
					in[h.ID()] = true
				}
				keep = func(h proc.HostID) bool { return in[h] }
			}
		}
	}
	opts, err := cfg.ClientOptions()
	if err != nil {
		return nil
	}
	// A lazy client connects on the listing, under the timeout: an eager
	// dial to an unreachable Temporal would retry past it.
	opts.Logger = tlog.NewStructuredLogger(config.Config{LogLevel: "error", LogFormat: "text"}.Logger())
	c, err := client.NewLazyClient(opts)
	if err != nil {
		return nil
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	digests, err := engine.ListDigests(ctx, c, opts.DataConverter, cfg.TaskQueue, keep)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, hd := range digests {
		for _, p := range hd.Digest.Procs {
			if v := pick(p); v != "" && !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	sort.Strings(out)
	return out
}
