package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/internal/filestore"
	"github.com/drover-sh/drover/proc"
)

// openStore opens the configured content store (see filestore.Locate).
func openStore(ctx context.Context, cfg config.Config) (filestore.Store, error) {
	l, err := cfg.Store()
	if err != nil {
		return filestore.Store{}, err
	}
	return filestore.Open(ctx, l)
}

// openServingStore opens the content store of a long-running process (the
// worker, the HTTP server). An object store it cannot reach now is logged,
// not fatal: it may come back before the first file op needs it. Nor is a
// default directory it cannot make (no home, a read-only one): it runs
// without a store, and its file ops fail saying so.
func openServingStore(cfg config.Config, logger *slog.Logger) (filestore.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := openStore(ctx, cfg)
	if err != nil && cfg.ContentStore == "" && cfg.FilesDir == "" {
		logger.Warn("no content store: config push, repair and long log tails fail until content_store is set", "err", err)
		return filestore.Store{}, nil
	}
	if err != nil {
		return store, err
	}
	if err := store.Check(ctx); err != nil {
		logger.Warn("content store not reachable: config push, repair and long log tails fail until it is", "err", err)
	}
	return store, nil
}

func newConfigCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Push a process's config files to hosts, or repair drifted ones",
	}
	var push verbFlags
	var files []string
	var then string
	pushCmd := &cobra.Command{
		Use:   "push --namespace NS --name NAME --hosts SELECTOR --file LOCAL:REMOTE[:MODE]... [--then reload|restart]",
		Short: "Write config files on hosts over SFTP as the process's account, record their md5, then optionally reload or restart",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFilesTask(cmd, gseapi.APIPushConfig, push, func(store filestore.Store, req map[string]any) error {
				return pushBody(cmd.Context(), store, req, files, then)
			})
		},
	}
	addVerbFlags(pushCmd, &push)
	pushCmd.Flags().StringArrayVar(&files, "file", nil, "LOCAL:REMOTE[:MODE]: a local file, the absolute path to write it to, and its octal mode (default 0644); repeatable")
	pushCmd.Flags().StringVar(&then, "then", "", "after the files are in place: reload or restart the process, in the same operation")
	_ = pushCmd.RegisterFlagCompletionFunc("then", cobra.FixedCompletions([]string{proc.ThenReload, proc.ThenRestart}, cobra.ShellCompDirectiveNoFileComp))

	var repair verbFlags
	repairCmd := &cobra.Command{
		Use:   "repair --namespace NS --name NAME --hosts SELECTOR",
		Short: "Restore drifted config files from the content pushed last (or named in the configmap's source)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFilesTask(cmd, gseapi.APIRepairConfig, repair, nil)
		},
	}
	addVerbFlags(repairCmd, &repair)
	cmd.AddCommand(pushCmd, repairCmd)
	return cmd
}

// runFilesTask builds a file API's body (meta, hosts, and what fill adds),
// decodes it as any caller's, stores its contents, and runs it.
func runFilesTask(cmd *cobra.Command, api string, f verbFlags, fill func(filestore.Store, map[string]any) error) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	bad := func(err error) error { return &ExitError{Code: ExitBadRequest, Err: err} }
	cfg, err := config.Load(cmd.Flags())
	if err != nil {
		return bad(err)
	}
	req, err := metaHostsBody(cfg, f)
	if err != nil {
		return bad(err)
	}
	store, err := openStore(cmd.Context(), cfg)
	if err != nil {
		return bad(err)
	}
	defer store.Close()
	if fill != nil {
		if err := fill(store, req); err != nil {
			return bad(err)
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return bad(err)
	}
	task, err := gseapi.DecodeTask(api, body)
	if err != nil {
		return bad(err)
	}
	if err := gseapi.StoreFiles(cmd.Context(), task, store); err != nil {
		return bad(err)
	}
	print := printRecap
	if api == gseapi.APITailLog {
		print = logsPrinter(cmd.Context(), store)
	}
	return runTask(cmd, cfg, task, f, nil, print)
}

// pushBody adds the files to push: each path is checked and each file's
// size refused over the limit before anything is read or stored.
func pushBody(ctx context.Context, store filestore.Store, req map[string]any, specs []string, then string) error {
	if len(specs) == 0 {
		return errors.New("--file: at least one LOCAL:REMOTE[:MODE] is required")
	}
	var files []map[string]any
	for i, s := range specs {
		local, remote, mode, err := parseFileFlag(s)
		if err != nil {
			return fmt.Errorf("--file[%d] %q: %w", i, s, err)
		}
		if _, err := proc.CheckRemotePath(remote); err != nil {
			return fmt.Errorf("--file[%d] %q: remote path %w", i, s, err)
		}
		ref, err := store.PutFile(ctx, local)
		if err != nil {
			return fmt.Errorf("--file[%d] %s: %w", i, local, err)
		}
		f := map[string]any{"path": remote, "sha256": ref.SHA256}
		if mode != "" {
			f["mode"] = mode
		}
		files = append(files, f)
	}
	req["files"] = files
	if then != "" {
		req["then"] = then
	}
	return nil
}

// parseFileFlag splits LOCAL:REMOTE[:MODE]. The remote path is absolute,
// so the first ":/" ends the local one; a last part of octal digits is the
// mode.
func parseFileFlag(s string) (local, remote, mode string, err error) {
	i := strings.Index(s, ":/")
	if i <= 0 {
		return "", "", "", errors.New("want LOCAL:REMOTE[:MODE] with an absolute REMOTE path")
	}
	local, remote = s[:i], s[i+1:]
	if j := strings.LastIndexByte(remote, ':'); j >= 0 {
		m := remote[j+1:]
		if m == "" || strings.Trim(m, "01234567") != "" {
			return "", "", "", fmt.Errorf("mode %q: want octal digits such as 0640", m)
		}
		remote, mode = remote[:j], m
	}
	return local, remote, mode, nil
}

// checkOutput refuses an output format no verb prints.
func checkOutput(o string) error {
	switch o {
	case "table", "wide", "json", "yaml":
		return nil
	}
	return &ExitError{Code: ExitBadRequest, Err: fmt.Errorf("-o %q: must be table, wide, json or yaml", o)}
}
