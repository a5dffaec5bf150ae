// Command worker runs drover's workflows and host activities.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/internal/config"
)

func main() {
	cmd := &cobra.Command{
		Use:           "worker",
		Short:         "Run drover's workflows and host activities",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cmd.Flags())
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return cli.RunWorker(ctx, cfg, cfg.Logger())
		},
	}
	config.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(&cobra.Command{
		Use:   "setup",
		Short: "Register drover's search attributes in the Temporal namespace (once per cluster)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cmd.Flags())
			if err != nil {
				return err
			}
			return cli.Setup(cmd.Context(), cfg, cmd.OutOrStdout())
		},
	})
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}
