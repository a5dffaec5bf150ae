package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/drover-sh/drover/inventory"
)

// reloadOnHangup reloads the inventory on each SIGHUP until ctx ends, the
// way daemons re-read their configuration, instead of the default exit.
func reloadOnHangup(ctx context.Context, live *inventory.Live) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = live.Reload() // logged by Reload
			}
		}
	}()
}
