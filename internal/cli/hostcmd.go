package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

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
			h, cfg, err := hostArg(cmd, args[0])
			if err != nil {
				return err
			}
			c, err := dial(cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			run, err := hostloss.Restore(cmd.Context(), c, cfg.TemporalNamespace, h)
			if err != nil {
				return &ExitError{Code: ExitBadRequest, Err: err}
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "restored %s (run %s): its registry and supervision are back\n", workflows.HostWorkflowID(h), run)
			return err
		},
	})
	var yes bool
	forget := &cobra.Command{
		Use:   "forget HOST",
		Short: "Start a host over with an empty registry (HOST is CLOUD:IP); a running one needs --yes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, cfg, err := hostArg(cmd, args[0])
			if err != nil {
				return err
			}
			c, err := dial(cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			run, err := hostloss.Forget(cmd.Context(), c, cfg.TaskQueue, h, yes)
			if err != nil {
				return &ExitError{Code: ExitBadRequest, Err: err}
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "started %s over (run %s): its registry is empty\n", workflows.HostWorkflowID(h), run)
			return err
		},
	}
	forget.Flags().BoolVar(&yes, "yes", false, "terminate the host's running workflow, dropping its registry and supervision")
	cmd.AddCommand(forget)
	return cmd
}

// hostArg reads HOST, CLOUD:IP as the 9108 message names it (the workflow
// id, host:CLOUD:IP, is read too), and the configuration.
func hostArg(cmd *cobra.Command, arg string) (proc.HostID, config.Config, error) {
	h, ok := proc.ParseCloudIP(strings.TrimPrefix(arg, "host:"))
	if !ok {
		err := fmt.Errorf("HOST %q: want CLOUD:IP, as in 0:10.0.0.1", arg)
		return h, config.Config{}, &ExitError{Code: ExitBadRequest, Err: err}
	}
	cfg, err := config.Load(cmd.Flags())
	if err != nil {
		return h, cfg, &ExitError{Code: ExitBadRequest, Err: err}
	}
	return h, cfg, nil
}
