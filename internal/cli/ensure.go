package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

type ensureFlags struct {
	verbFlags
	state   string
	managed bool
}

func newEnsureCommand() *cobra.Command {
	var f ensureFlags
	cmd := &cobra.Command{
		Use:   "ensure --namespace NS --name NAME --hosts SELECTOR --state running|stopped|absent [--managed]",
		Short: "Converge a process on hosts to a state; report ok, changed or failed per host",
		Long: "Read the process's status on every host, then run only what each host needs:\n" +
			"running starts it (--managed also puts a running one under supervision),\n" +
			"stopped stops it, absent stops it and removes its spec.\n\n" +
			"Exit 0: every host already so; 5: some changed, none failed; 1: some failed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runEnsure(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.namespace, "namespace", "", "process namespace (meta.namespace)")
	fl.StringVar(&f.name, "name", "", "process name (meta.name)")
	fl.StringVar(&f.hosts, "hosts", "all", hostsUsage)
	fl.StringVar(&f.state, "state", "", "running, stopped or absent")
	fl.BoolVar(&f.managed, "managed", false, "with --state running: also under supervision")
	fl.DurationVar(&f.timeout, "timeout", 0, "give up waiting after this long (0: no limit)")
	completeProcessFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions([]string{policies.StateRunning, policies.StateStopped, policies.StateAbsent}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// ensureRow is one host's outcome.
type ensureRow struct {
	key     string
	outcome string // ok, changed, failed
	detail  string
}

func runEnsure(cmd *cobra.Command, f ensureFlags) error {
	if err := policies.ValidEnsure(f.state, f.managed); err != nil {
		return &ExitError{Code: ExitBadRequest, Err: err}
	}
	cfg, inv, hosts, err := selectHosts(cmd, f.hosts)
	if err != nil {
		return err
	}
	// Every request is checked before anything runs: a bad name fails
	// here, not after some hosts changed.
	status, err := ensureTask(gseapi.APIOperateProcess, proc.OpStatus, f.verbFlags, hosts)
	if err != nil {
		return &ExitError{Code: ExitBadRequest, Err: err}
	}
	ctx, eng, done, err := dialWithin(cmd, cfg, inv, f.timeout)
	if err != nil {
		return err
	}
	defer done()
	seen, err := runEnsureTask(ctx, eng, status)
	if err != nil {
		return err
	}
	rows := make([]ensureRow, len(hosts))
	steps := make([]policies.EnsureStep, len(hosts))
	for i, it := range status.Items {
		r := seen[it.Key()]
		steps[i] = policies.Ensure(f.state, f.managed, policies.Observed{Code: r.Code, Message: r.Message, Managed: managedIn(r.Content)})
		rows[i] = ensureRow{key: hostOfKey(it.Key()), outcome: "ok"}
		if steps[i].Fail != "" {
			rows[i].outcome, rows[i].detail = "failed", steps[i].Fail
		}
	}
	// Each stage runs every host's next op, one task per op type; a host
	// whose op failed goes no further.
	for stage := 0; ; stage++ {
		byOp := map[proc.OpType][]int{}
		var order []proc.OpType
		for i, s := range steps {
			if rows[i].outcome == "failed" || stage >= len(s.Ops) {
				continue
			}
			op := s.Ops[stage]
			if _, ok := byOp[op]; !ok {
				order = append(order, op)
			}
			byOp[op] = append(byOp[op], i)
		}
		if len(order) == 0 {
			break
		}
		for _, op := range order {
			if err := ensureStage(ctx, eng, f, op, hosts, byOp[op], rows); err != nil {
				return err
			}
		}
	}
	return printEnsure(cmd.OutOrStdout(), rows)
}

// ensureStage runs op on hosts[idx] and records each host's outcome.
func ensureStage(ctx context.Context, eng *engine.Engine, f ensureFlags, op proc.OpType, hosts []inventory.Host, idx []int, rows []ensureRow) error {
	api := gseapi.APIOperateProcess
	if op == proc.OpSpecUnregister {
		api = gseapi.APIUnregisterProcInfo
	}
	subset := make([]inventory.Host, len(idx))
	for n, i := range idx {
		subset[n] = hosts[i]
	}
	task, err := ensureTask(api, op, f.verbFlags, subset)
	if err != nil {
		return &ExitError{Code: ExitBadRequest, Err: err}
	}
	res, err := runEnsureTask(ctx, eng, task)
	if err != nil {
		return err
	}
	name := op.String()
	if op == proc.OpRegister {
		name = "manage"
	} else if op == proc.OpUnregister {
		name = "unmanage"
	}
	for n, i := range idx {
		r := res[task.Items[n].Key()]
		if r.Code != proc.CodeSuccess {
			rows[i].outcome, rows[i].detail = "failed", fmt.Sprintf("%s answered %d: %s", name, int(r.Code), r.Message)
			continue
		}
		rows[i].outcome = "changed"
		rows[i].detail = strings.TrimPrefix(rows[i].detail+", "+name, ", ")
	}
	return nil
}

func ensureTask(api string, op proc.OpType, f verbFlags, hosts []inventory.Host) (*gseapi.Task, error) {
	body, err := verbBody(api, op, f, hosts)
	if err != nil {
		return nil, err
	}
	return gseapi.DecodeTask(api, body)
}

func runEnsureTask(ctx context.Context, eng *engine.Engine, task *gseapi.Task) (map[string]proc.HostResult, error) {
	id, err := eng.Start(ctx, task)
	if err != nil {
		return nil, &ExitError{Code: ExitUnavailable, Err: err}
	}
	list, err := eng.Results(ctx, id, true)
	if err != nil {
		return nil, &ExitError{Code: ExitUnavailable, Err: err}
	}
	return proc.ByKey(list), nil
}

// managedIn reads isAuto from a status content.
func managedIn(content string) bool {
	var c statusFields
	return json.Unmarshal([]byte(content), &c) == nil && len(c.Process) > 0 && len(c.Process[0].Instance) > 0 && c.Process[0].Instance[0].IsAuto
}

// printEnsure prints one line per host and the recap, and picks the exit.
func printEnsure(w io.Writer, rows []ensureRow) error {
	counts := map[string]int{}
	for _, r := range rows {
		counts[r.outcome]++
		line := fmt.Sprintf("%s: [%s]", r.outcome, r.key)
		if r.detail != "" {
			line += " => " + r.detail
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "\nRECAP: ok=%d changed=%d failed=%d\n", counts["ok"], counts["changed"], counts["failed"])
	switch {
	case counts["failed"] > 0:
		return &ExitError{Code: ExitHostsFailed}
	case counts["changed"] > 0:
		return &ExitError{Code: ExitChanged}
	}
	return nil
}
