package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/filestore"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

func newLogsCommand() *cobra.Command {
	var f verbFlags
	var tail int
	var grep string
	cmd := &cobra.Command{
		Use:   "logs --namespace NS --name NAME --hosts SELECTOR [--tail N] [--grep RE]",
		Short: "Print the tail of a process's log_path from each host (read over SFTP as its account)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFilesTask(cmd, gseapi.APITailLog, f, func(_ filestore.Store, req map[string]any) error {
				if cmd.Flags().Changed("tail") {
					// Absent, the default tail: 20 lines, at most 2 KB.
					req["tail"] = tail
				}
				if grep != "" {
					req["grep"] = grep
				}
				return nil
			})
		},
	}
	addVerbFlags(cmd, &f)
	cmd.Flags().IntVarP(&tail, "tail", "n", policies.LogTailDefault, fmt.Sprintf("last lines to print (at most %d; read from the last %d KiB of the log; by default at most %d KiB)",
		policies.LogTailMax, policies.LogReadMax>>10, policies.LogTailDefaultBytes>>10))
	cmd.Flags().StringVar(&grep, "grep", "", "print only lines matching this regular expression (RE2)")
	return cmd
}

// logEntry is one host's log tail, for -o json.
type logEntry struct {
	Key     string    `json:"key"`
	Code    proc.Code `json:"error_code"`
	Message string    `json:"error_msg"`
	Path    string    `json:"path,omitempty"`
	Lines   []string  `json:"lines,omitempty"`
}

// logsPrinter prints each host's tail: from its result, or, for a long
// one, from the content store where the worker left it. A tail it cannot
// read turns its host's result into 9199, so the exit code counts it.
func logsPrinter(ctx context.Context, store filestore.Store) func(io.Writer, *gseapi.Task, map[string]proc.HostResult, string) error {
	return func(w io.Writer, task *gseapi.Task, res map[string]proc.HostResult, format string) error {
		var entries []logEntry
		for _, it := range task.Items {
			r := res[it.Key()]
			e := logEntry{Key: it.Key(), Code: r.Code, Message: r.Message}
			var lc proc.LogContent
			if r.Code == proc.CodeSuccess && json.Unmarshal([]byte(r.Content), &lc) == nil {
				text, err := lc.Text, error(nil)
				if lc.Tail != nil {
					text, err = store.ReadTail(ctx, *lc.Tail)
				}
				if err != nil {
					e.Code, e.Message = proc.CodeInternal, fmt.Sprintf("read the tail: %v", err)
					res[it.Key()] = proc.HostResult{Code: e.Code, Message: e.Message}
				} else {
					e.Path, e.Lines = lc.Path, splitLines(text)
				}
			}
			entries = append(entries, e)
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Key < entries[j].Key })
		if format == "json" || format == "yaml" {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(entries)
		}
		counts := map[proc.Code]int{}
		for _, e := range entries {
			counts[e.Code]++
			if e.Code != proc.CodeSuccess {
				fmt.Fprintf(w, "==> %s: %d %s <==\n", e.Key, e.Code, e.Message)
				continue
			}
			fmt.Fprintf(w, "==> %s: %s <==\n", e.Key, e.Path)
			for _, l := range e.Lines {
				fmt.Fprintln(w, l)
			}
		}
		_, err := fmt.Fprintf(w, "%d hosts: %s\n", len(entries), countsLine(counts))
		return err
	}
}

// splitLines splits a tail into its lines, without a last empty one.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
