package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/inventory"
)

func newServeCommand() *cobra.Command {
	var listen string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the GSE APIs over HTTP for existing BlueKing callers",
		Long: "Serve the GSE APIs over HTTP:\n" +
			"  POST /api/c/compapi/v2/gse/<api_name>/   (BlueKing ESB)\n" +
			"  POST /api/v2/proc/<api_name>             (GSE 2.0 gateway)\n" +
			"  GET  /healthz\n" +
			"Callers authenticate with bk_app_code and bk_app_secret (in the body, or the\n" +
			"X-Bkapi-Authorization header) against the apps in the config file.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			apps, err := resolveApps(cfg.Apps)
			if err != nil {
				return &ExitError{Code: ExitBadRequest, Err: err}
			}
			inv, err := agentInventory(cfg)
			if err != nil {
				return &ExitError{Code: ExitBadRequest, Err: err}
			}
			if inv == nil {
				inv = &inventory.Inventory{} // filled if the file appears
			}
			logger := cfg.Logger()
			live := inventory.NewLive(cfg.Inventory, inv, logger, nil)
			c, err := Dial(cfg, logger)
			if err != nil {
				return &ExitError{Code: ExitUnavailable, Err: err}
			}
			defer c.Close()
			store, err := openServingStore(cfg, logger)
			if err != nil {
				return &ExitError{Code: ExitBadRequest, Err: err}
			}
			defer store.Close()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return &ExitError{Code: ExitBadRequest, Err: fmt.Errorf("--listen %s: %w", listen, err)}
			}
			g := &gseapi.Gateway{Engine: engineWith(c, cfg, inv, store), Apps: apps, Logger: logger, Timeout: timeout}
			srv := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
				WriteTimeout: timeout + 30*time.Second, IdleTimeout: 2 * time.Minute}
			logger.Info("serving the GSE APIs", "listen", ln.Addr().String(), "apps", len(apps), "content_store", store.Location().String())
			return serveUntilSignal(cmd, srv, ln, live)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on")
	cmd.Flags().DurationVar(&timeout, "request-timeout", 2*time.Minute, "longest one request may take")
	return cmd
}

func resolveApps(cfgs []config.AppConfig) ([]gseapi.App, error) {
	if len(cfgs) == 0 {
		return nil, errors.New("apps: no app may call the API; list apps (code and secret_env or secret_file) in the config file")
	}
	apps := make([]gseapi.App, 0, len(cfgs))
	for _, a := range cfgs {
		secret, err := a.Secret()
		if err != nil {
			return nil, err
		}
		for i, ns := range a.Namespaces {
			if ns == "" {
				return nil, fmt.Errorf("apps[%s].namespaces[%d]: must not be empty (leave the list out to allow every namespace)", a.Code, i)
			}
		}
		apps = append(apps, gseapi.App{Code: a.Code, Secret: secret, Namespaces: a.Namespaces})
	}
	return apps, nil
}

// serveUntilSignal prints the bound address (tests and scripts read it) and
// serves until SIGINT or SIGTERM, then shuts down gracefully. Meanwhile an
// inventory, when given, is reloaded when its file changes, or on SIGHUP.
func serveUntilSignal(cmd *cobra.Command, srv *http.Server, ln net.Listener, live *inventory.Live) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if live != nil {
		live.Watch(ctx)
		reloadOnHangup(ctx, live)
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintln(cmd.OutOrStdout(), ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
