package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/drover-sh/drover/internal/config"
)

// NewWorker builds the worker command: it runs until SIGINT or SIGTERM,
// and reloads its inventory on SIGHUP.
// Its flags are the shared ones plus the settings only a worker acts on.
func NewWorker() *cobra.Command {
	cmd := &cobra.Command{
		Use:           "worker",
		Short:         "Run drover's workflows and host activities",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cmd.Flags())
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return RunWorker(ctx, cfg, cfg.Logger())
		},
	}
	config.AddFlags(cmd.PersistentFlags())
	config.AddWorkerFlags(cmd.Flags())
	addVersion(cmd)
	var renewAll bool
	setup := &cobra.Command{
		Use:   "setup",
		Short: "Register drover's search attributes in the Temporal namespace (once per cluster)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cmd.Flags())
			if err != nil {
				return err
			}
			return Setup(cmd.Context(), cfg, renewAll, cmd.OutOrStdout())
		},
	}
	setup.Flags().BoolVar(&renewAll, "renew", false, "ask every running host workflow for a new run on this release (at its next op or supervision decision), as retiring a change's old branch needs")
	cmd.AddCommand(setup)
	return cmd
}
