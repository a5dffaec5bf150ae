package cli

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-sh/drover/internal/codec"
)

func newCodecServerCommand() *cobra.Command {
	var listen, tokenEnv string
	var origins []string
	cmd := &cobra.Command{
		Use:   "codec-server",
		Short: "Serve the payload codec so the Temporal UI and CLI can show encrypted payloads",
		Long: "Serve POST /encode and /decode with the configured payload key (codec_key_file or\n" +
			"codec_key_env). Point the Temporal UI at it (--ui-codec-endpoint on the dev server,\n" +
			"or the UI's codec setting) or the CLI (temporal ... --codec-endpoint URL). Anyone\n" +
			"who can reach it can decrypt: listen on loopback or behind the operators' proxy.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			cd, err := cfg.Codec()
			if err != nil {
				return &ExitError{Code: ExitBadRequest, Err: err}
			}
			if cd == nil {
				return &ExitError{Code: ExitBadRequest, Err: errors.New("codec_key_file or codec_key_env: set one; payload encryption is off")}
			}
			opts := codec.ServerOptions{Origins: origins}
			if tokenEnv != "" {
				opts.Token = os.Getenv(tokenEnv)
				if opts.Token == "" {
					return &ExitError{Code: ExitBadRequest, Err: fmt.Errorf("--token-env: %s is not set", tokenEnv)}
				}
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return &ExitError{Code: ExitBadRequest, Err: fmt.Errorf("--listen %s: %w", listen, err)}
			}
			srv := &http.Server{Handler: codec.Handler(cd, opts), ReadHeaderTimeout: 10 * time.Second,
				ReadTimeout: time.Minute, WriteTimeout: time.Minute}
			cfg.Logger().Info("serving the payload codec", "listen", ln.Addr().String(), "key_id", cd.KeyID())
			return serveUntilSignal(cmd, srv, ln, nil)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8234", "address to listen on")
	cmd.Flags().StringSliceVar(&origins, "cors-origin", []string{"http://127.0.0.1:8233", "http://localhost:8233"}, "browser origins allowed to call it (the Temporal UI's)")
	cmd.Flags().StringVar(&tokenEnv, "token-env", "", "name of an env var holding a bearer token callers must send")
	return cmd
}
