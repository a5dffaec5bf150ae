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
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// Exit codes scripts can branch on.
const (
	ExitOK          = 0 // request accepted; with --wait, every host succeeded
	ExitHostsFailed = 1 // with --wait, at least one host ended non-zero
	ExitBadRequest  = 2 // the request broke a rule; nothing was started
	ExitUnavailable = 3 // Temporal could not be reached
	ExitInternal    = 4
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
	root.AddCommand(newAPICommand(), newResultCommand())
	return root
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
	file    string
	wait    bool
	timeout time.Duration
}

func newAPICommand() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "api NAME [-f FILE|-]",
		Short: "Call a GSE API by name with its documented JSON body",
		Long: "Call a GSE API by name. The body is the documented request JSON, verbatim;\n" +
			"the output is the documented response JSON.\n\n" +
			"APIs: operate_process, get_proc_operate_result",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readBody(cmd, f.file)
			if err != nil {
				return &ExitError{Code: ExitBadRequest, Err: err}
			}
			cfg, err := config.Load(cmd.Flags())
			if err != nil {
				return &ExitError{Code: ExitBadRequest, Err: err}
			}
			ctx := cmd.Context()
			if f.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, f.timeout)
				defer cancel()
			}
			return callAPI(ctx, cmd, cfg, args[0], body, f)
		},
	}
	cmd.Flags().StringVarP(&f.file, "file", "f", "-", "request body file, - for stdin")
	cmd.Flags().BoolVar(&f.wait, "wait", false, "wait for the task and print get_proc_operate_result")
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
	switch name {
	case "operate_process":
		req, err := gseapi.DecodeOperateProcess(body)
		if err != nil {
			return reject(cmd, err)
		}
		op, items := req.Items()
		in := workflows.OperateInput{TaskID: gseapi.NewTaskID(time.Now()), Op: op, Items: items}
		c, err := dial(cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := workflows.StartOperate(ctx, c, cfg.TaskQueue, in); err != nil {
			return &ExitError{Code: ExitUnavailable, Err: fmt.Errorf("start task: %w", err)}
		}
		if !f.wait {
			return printJSON(cmd, gseapi.OK(gseapi.TaskData{TaskID: in.TaskID}))
		}
		res, err := workflows.WaitOperate(ctx, c, in.TaskID)
		if err != nil {
			return &ExitError{Code: ExitUnavailable, Err: fmt.Errorf("wait for %s: %w", in.TaskID, err)}
		}
		return printResult(cmd, res)
	case "get_proc_operate_result":
		var req struct {
			gseapi.Caller
			TaskID string `json:"task_id"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return reject(cmd, &gseapi.FieldError{Field: "(body)", Rule: err.Error()})
		}
		if err := gseapi.ValidTaskID(req.TaskID); err != nil {
			return reject(cmd, err)
		}
		return fetchResult(ctx, cmd, cfg, req.TaskID)
	}
	return reject(cmd, &gseapi.FieldError{Field: "NAME", Rule: fmt.Sprintf("%q is not a known API (operate_process, get_proc_operate_result)", name)})
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
			cfg, err := config.Load(cmd.Flags())
			if err != nil {
				return &ExitError{Code: ExitBadRequest, Err: err}
			}
			return fetchResult(cmd.Context(), cmd, cfg, args[0])
		},
	}
}

func fetchResult(ctx context.Context, cmd *cobra.Command, cfg config.Config, taskID string) error {
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := workflows.FetchOperate(ctx, c, taskID)
	if errors.Is(err, workflows.ErrTaskNotFound) {
		_ = printJSON(cmd, gseapi.Failure(gseapi.CodeTaskNotFound, err))
		return &ExitError{Code: ExitBadRequest}
	}
	if err != nil {
		return &ExitError{Code: ExitUnavailable, Err: err}
	}
	return printResult(cmd, res)
}

func dial(cfg config.Config) (client.Client, error) {
	c, err := Dial(cfg, config.Config{LogLevel: "error", LogFormat: "text"}.Logger())
	if err != nil {
		return nil, &ExitError{Code: ExitUnavailable, Err: err}
	}
	return c, nil
}

// reject prints the documented failure envelope and exits as a bad request.
func reject(cmd *cobra.Command, err error) error {
	_ = printJSON(cmd, gseapi.Failure(0, err))
	return &ExitError{Code: ExitBadRequest, Err: err}
}

func printResult(cmd *cobra.Command, res workflows.OperateResult) error {
	m := make(map[string]proc.HostResult, len(res.Results))
	failed := false
	for _, r := range res.Results {
		m[r.Key] = r.HostResult
		if r.Code != proc.CodeSuccess {
			failed = true
		}
	}
	if err := printJSON(cmd, gseapi.OK(gseapi.ResultData(m))); err != nil {
		return err
	}
	if failed {
		return &ExitError{Code: ExitHostsFailed}
	}
	return nil
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
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
