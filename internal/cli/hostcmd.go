package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/internal/hostloss"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// newHostCommand is `starter host`: the way back for a host whose workflow
// was terminated or failed (its ops answer 9108).
func newHostCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "host restore|forget HOST",
		Short: "Bring back, or start over, a host whose workflow was terminated or failed",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "restore HOST",
		Short: "Bring back a closed host workflow with its registry and supervision (HOST is CLOUD:IP)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return onHost(cmd, args[0], "restored %s (run %s): its registry and supervision are back\n",
				func(ctx context.Context, c client.Client, cfg config.Config, h proc.HostID) (string, error) {
					return hostloss.Restore(ctx, c, cfg.TemporalNamespace, h)
				})
		},
	})
	var yes bool
	forget := &cobra.Command{
		Use:   "forget HOST",
		Short: "Start a host over with an empty registry (HOST is CLOUD:IP); a running one needs --yes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return onHost(cmd, args[0], "started %s over (run %s): its registry is empty\n",
				func(ctx context.Context, c client.Client, cfg config.Config, h proc.HostID) (string, error) {
					return hostloss.Forget(ctx, c, cfg.TaskQueue, h, yes)
				})
		},
	}
	forget.Flags().BoolVar(&yes, "yes", false, "terminate the host's running workflow, dropping its registry and supervision")
	cmd.AddCommand(forget)
	return cmd
}

// onHost runs a host subcommand: it reads HOST and the configuration,
// dials Temporal and has act bring the host's workflow back or start it
// over. act's failure is the request's; done says what it did, given the
// workflow's id and the run act started.
func onHost(cmd *cobra.Command, arg, done string, act func(context.Context, client.Client, config.Config, proc.HostID) (string, error)) error {
	h, cfg, c, err := hostClient(cmd, arg)
	if err != nil {
		return err
	}
	defer c.Close()
	run, err := act(cmd.Context(), c, cfg, h)
	if err != nil {
		return &ExitError{Code: ExitBadRequest, Err: err}
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), done, workflows.HostWorkflowID(h), run)
	return err
}

// hostClient reads HOST, CLOUD:IP as the 9108 message names it (the
// workflow id, host:CLOUD:IP, is read too), and the configuration, and
// dials Temporal; the caller closes c.
func hostClient(cmd *cobra.Command, arg string) (proc.HostID, config.Config, client.Client, error) {
	h, ok := proc.ParseCloudIP(strings.TrimPrefix(arg, "host:"))
	if !ok {
		err := fmt.Errorf("HOST %q: want CLOUD:IP, as in 0:10.0.0.1", arg)
		return h, config.Config{}, nil, &ExitError{Code: ExitBadRequest, Err: err}
	}
	cfg, err := loadConfig(cmd)
	if err != nil {
		return h, cfg, nil, err
	}
	c, err := dial(cfg)
	return h, cfg, c, err
}
