package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/workflows"
)

type eventFlags struct {
	hosts, kind, namespace, name, output string
	since                                time.Duration
	follow                               bool
}

// eventKinds are the kinds --kind completes.
var eventKinds = []string{workflows.EventRestartSuccess, workflows.EventRestartFailed, workflows.EventRestartDelayed,
	workflows.EventFoundRunning, workflows.EventCancelRestart, workflows.EventLimitExceed, workflows.EventConfigDrift,
	workflows.EventConfigRestored, workflows.EventPeriodicRun, workflows.EventPeriodicSkip, workflows.EventPeriodicFailed,
	workflows.EventWatchFailed}

func newEventsCommand() *cobra.Command {
	var f eventFlags
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List supervision events (restarts, give-ups, limits, drift, periodic runs)",
		Long: "List the supervision events the host workflows recorded, newest last;\n" +
			"--follow keeps printing new ones until interrupted.\n" +
			"Kinds: process_restart_success, process_restart_failed, process_restart_delayed,\n" +
			"process_found_running, process_cancel_restart,\n" +
			"process_resource_limit_exceed, process_config_drift, process_config_restored,\n" +
			"process_periodic_run, process_periodic_skip, process_periodic_failed, host_watch_failed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			if f.output != "table" && f.output != "json" {
				return &ExitError{Code: ExitBadRequest, Err: fmt.Errorf("-o %q: must be table or json", f.output)}
			}
			_, hosts, err := hostsIn(cfg, f.hosts)
			if err != nil {
				return err
			}
			c, err := dial(cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			if f.follow {
				// Following ends at Ctrl-C, which is no failure.
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			evs, err := collectEvents(ctx, c, hosts)
			if err != nil {
				return &ExitError{Code: ExitUnavailable, Err: err}
			}
			shown := evs
			evs = filterEvents(evs, f, time.Now())
			if f.output == "json" && !f.follow {
				return printJSON(cmd, evs)
			}
			ew := &eventWriter{w: cmd.OutOrStdout(), json: f.output == "json", fixed: f.follow}
			if err := ew.write(evs); err != nil || !f.follow {
				return err
			}
			opts, err := cfg.ClientOptions()
			if err != nil {
				return &ExitError{Code: ExitBadRequest, Err: err}
			}
			if err := follow(ctx, c, opts.DataConverter, hostIDs(hosts), shown, f, ew); err != nil {
				return &ExitError{Code: ExitUnavailable, Err: err}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&f.hosts, "hosts", "all", hostsUsage)
	cmd.Flags().StringVar(&f.kind, "kind", "", "only events of this kind (a prefix works: process_restart)")
	cmd.Flags().StringVar(&f.namespace, "namespace", "", "only processes of this namespace")
	cmd.Flags().StringVar(&f.name, "name", "", "only processes of this name")
	cmd.Flags().DurationVar(&f.since, "since", 0, "only events this recent (e.g. 24h)")
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "table or json (with --follow, one JSON object per line)")
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "keep printing new events until interrupted")
	completeProcessFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions(eventKinds, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// collectEvents queries the events of each host's workflow; hosts without
// one have none.
func collectEvents(ctx context.Context, c client.Client, hosts []inventory.Host) ([]workflows.Event, error) {
	var mu sync.Mutex
	var out []workflows.Event
	var g errgroup.Group
	g.SetLimit(32)
	for _, h := range hosts {
		g.Go(func() error {
			var evs []workflows.Event
			if _, err := engine.QueryOpen(ctx, c, workflows.HostWorkflowID(h.ID()), workflows.EventsQuery, &evs); err != nil {
				return fmt.Errorf("events: %w", err)
			}
			mu.Lock()
			defer mu.Unlock()
			out = append(out, evs...)
			return nil
		})
	}
	firstErr := g.Wait()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, firstErr
}

func filterEvents(evs []workflows.Event, f eventFlags, now time.Time) []workflows.Event {
	out := []workflows.Event{}
	for _, ev := range evs {
		switch {
		case f.kind != "" && !strings.HasPrefix(ev.Kind, f.kind),
			f.namespace != "" && ev.Process.Namespace != f.namespace,
			f.name != "" && ev.Process.Name != f.name,
			f.since > 0 && ev.Time.Before(now.Add(-f.since)):
			continue
		}
		out = append(out, ev)
	}
	return out
}
