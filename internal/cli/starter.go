// Package cli holds the starter and worker commands, so tests drive exactly
// what operators run.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/internal/version"
	"github.com/drover-sh/drover/inventory"
)

// Exit codes scripts can branch on.
const (
	ExitOK          = 0 // request accepted; with --wait, every host succeeded
	ExitHostsFailed = 1 // with --wait, at least one host ended non-zero
	ExitBadRequest  = 2 // the request broke a rule; nothing was started
	ExitUnavailable = 3 // Temporal could not be reached
	ExitInternal    = 4
	ExitChanged     = 5 // ensure: some host changed, none failed
)

// ExitError carries an exit code out of a command.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}
func (e *ExitError) Unwrap() error { return e.Err }

// NewStarter builds the starter command tree writing to out and errOut.
func NewStarter(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "starter",
		Short:         "Submit drover ops and read their results",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	config.AddFlags(root.PersistentFlags())
	root.AddCommand(newAPICommand(), newResultCommand(), newEventsCommand(), newServeCommand(), newHostsCommand(), newCodecServerCommand(), newPsCommand(),
		newEnsureCommand(), newRolloutCommand(), newConfigCommand(), newLogsCommand(), newHostCommand(), newCancelCommand())
	root.AddCommand(newVerbCommands()...)
	addVersion(root)
	return root
}

// addVersion gives a binary's root command --version and a version
// command, both printing the build (see internal/version).
func addVersion(root *cobra.Command) {
	root.Version = version.Get().String()
	root.SetVersionTemplate(root.Name() + " {{.Version}}\n")
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version and commit this binary was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", root.Name(), root.Version)
			return err
		},
	})
}

// Execute runs the starter and returns the process exit code.
func Execute(args []string, out, errOut io.Writer) int {
	root := NewStarter(out, errOut)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Err != nil {
		fmt.Fprintln(errOut, "starter:", err)
	}
	return ExitCodeOf(err)
}

type apiFlags struct {
	file       string
	wait, plan bool
	timeout    time.Duration
}

func newAPICommand() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "api NAME [-f FILE|-]",
		Short: "Call a GSE API by name with its documented JSON body",
		Long: "Call a GSE API by name. The body is the documented request JSON, verbatim;\n" +
			"the output is the documented response JSON.\n\n" +
			"APIs: " + strings.Join(gseapi.APIs, ", "),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readBody(cmd, f.file)
			if err != nil {
				return &ExitError{Code: ExitBadRequest, Err: err}
			}
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd, f.timeout)
			defer cancel()
			if f.plan {
				return planAPI(ctx, cmd, cfg, args[0], body)
			}
			return callAPI(ctx, cmd, cfg, args[0], body, f)
		},
	}
	cmd.Flags().StringVarP(&f.file, "file", "f", "-", "request body file, - for stdin")
	cmd.Flags().BoolVar(&f.wait, "wait", false, "wait for the task and print get_proc_operate_result")
	cmd.Flags().BoolVar(&f.plan, "plan", false, "print what each host would run, grouped, and change nothing")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "give up waiting after this long (0: no limit)")
	return cmd
}

func readBody(cmd *cobra.Command, file string) ([]byte, error) {
	var r io.Reader
	if file == "-" {
		r = cmd.InOrStdin()
	} else {
		fh, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", file, err)
		}
		defer fh.Close()
		r = fh
	}
	b, err := io.ReadAll(io.LimitReader(r, gseapi.MaxBodyBytes+1))
	if err != nil {
		return nil, err
	}
	return b, nil
}

func callAPI(ctx context.Context, cmd *cobra.Command, cfg config.Config, name string, body []byte, f apiFlags) error {
	// Decode before dialling: a bad request never reaches Temporal.
	if err := gseapi.Validate(name, body); err != nil {
		return reject(cmd, err)
	}
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	inv, err := agentInventory(cfg)
	if err != nil {
		return &ExitError{Code: ExitBadRequest, Err: err}
	}
	eng := taskEngine(c, cfg, inv)
	if slices.Contains(gseapi.FileAPIs, name) {
		store, err := openStore(ctx, cfg)
		if err != nil {
			return &ExitError{Code: ExitBadRequest, Err: err}
		}
		defer store.Close()
		eng.Files = store
	}
	resp, outcome := gseapi.Call(ctx, eng, name, body, f.wait)
	return finish(cmd, resp, outcome)
}

// agentInventory loads the inventory that maps agent ids (agent_id_list)
// to hosts where a request enters, so every key of a task is known from its
// first poll. No inventory file is no mapping: only "<bk_cloud_id>:<ip>" ids
// then name hosts, and opaque ids answer 9104. A file that exists but does
// not load is an error.
func agentInventory(cfg config.Config) (*inventory.Inventory, error) {
	if _, err := os.Stat(cfg.Inventory); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return inventory.Load(cfg.Inventory)
}

// finish prints the response and maps the outcome to the exit code.
func finish(cmd *cobra.Command, resp gseapi.Response, outcome gseapi.Outcome) error {
	if err := printJSON(cmd, resp); err != nil {
		return err
	}
	switch outcome {
	case gseapi.OutcomeOK:
		return nil
	case gseapi.OutcomeHostsFailed:
		return &ExitError{Code: ExitHostsFailed}
	case gseapi.OutcomeUnavailable:
		return &ExitError{Code: ExitUnavailable, Err: errors.New(resp.Message)}
	}
	return &ExitError{Code: ExitBadRequest, Err: errors.New(resp.Message)}
}

func newResultCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "result TASK_ID",
		Short: "Print get_proc_operate_result for a task",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := gseapi.ValidTaskID(args[0]); err != nil {
				return reject(cmd, err)
			}
			body, _ := json.Marshal(map[string]string{"task_id": args[0]})
			return callEngine(cmd, func(ctx context.Context, eng *engine.Engine) (gseapi.Response, gseapi.Outcome) {
				return gseapi.Call(ctx, eng, gseapi.APIGetProcOperateResult, body, false)
			})
		},
	}
}

func newCancelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel TASK_ID",
		Short: "Cancel a task: queued host ops never run, running ones are ended, every key answers 9109 unless it had finished",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, _ := json.Marshal(map[string]string{"task_id": args[0]})
			if err := gseapi.Validate(gseapi.APICancelTask, body); err != nil {
				return reject(cmd, err)
			}
			return callEngine(cmd, func(ctx context.Context, eng *engine.Engine) (gseapi.Response, gseapi.Outcome) {
				return gseapi.Call(ctx, eng, gseapi.APICancelTask, body, false)
			})
		},
	}
}

// callEngine connects, has call answer over the task engine, and prints
// the answer: the way of the commands that name a task by id (result,
// cancel, rollout).
func callEngine(cmd *cobra.Command, call func(context.Context, *engine.Engine) (gseapi.Response, gseapi.Outcome)) error {
	eng, err := connect(cmd)
	if err != nil {
		return err
	}
	defer eng.Client.Close()
	resp, outcome := call(cmd.Context(), eng)
	return finish(cmd, resp, outcome)
}

// loadConfig reads the configuration the command's flags and files give;
// one that does not load is a bad request.
func loadConfig(cmd *cobra.Command) (config.Config, error) {
	cfg, err := config.Load(cmd.Flags())
	if err != nil {
		return cfg, &ExitError{Code: ExitBadRequest, Err: err}
	}
	return cfg, nil
}

func dial(cfg config.Config) (client.Client, error) {
	c, err := Dial(cfg, config.Config{LogLevel: "error", LogFormat: "text"}.Logger())
	if err != nil {
		return nil, &ExitError{Code: ExitUnavailable, Err: err}
	}
	return c, nil
}

// dialEngine dials Temporal and builds the task engine on the client, inv
// mapping agent ids (nil: none); the caller closes eng.Client.
func dialEngine(cfg config.Config, inv *inventory.Inventory) (*engine.Engine, error) {
	c, err := dial(cfg)
	if err != nil {
		return nil, err
	}
	return taskEngine(c, cfg, inv), nil
}

// connect is loadConfig then dialEngine, for a command that reaches tasks
// by id and needs no inventory.
func connect(cmd *cobra.Command) (*engine.Engine, error) {
	cfg, err := loadConfig(cmd)
	if err != nil {
		return nil, err
	}
	return dialEngine(cfg, nil)
}

// dialWithin is dialEngine for a command bounded by timeout (0: none):
// ctx is the command's context so bounded, and done closes the client and
// ends ctx.
func dialWithin(cmd *cobra.Command, cfg config.Config, inv *inventory.Inventory, timeout time.Duration) (ctx context.Context, eng *engine.Engine, done func(), err error) {
	ctx, cancel := withTimeout(cmd, timeout)
	if eng, err = dialEngine(cfg, inv); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, eng, func() { eng.Client.Close(); cancel() }, nil
}

// reject prints the documented failure envelope and exits as a bad request.
func reject(cmd *cobra.Command, err error) error {
	_ = printJSON(cmd, gseapi.Failure(0, err))
	return &ExitError{Code: ExitBadRequest, Err: err}
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printJSONLine writes v as one line of JSON, for streams.
func printJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// ExitCodeOf maps an error returned by the starter's commands to the exit code.
func ExitCodeOf(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitBadRequest
}

// withTimeout bounds a command's context by --timeout; zero means no bound.
func withTimeout(cmd *cobra.Command, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(cmd.Context(), d)
	}
	return context.WithCancel(cmd.Context())
}
