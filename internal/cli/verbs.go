package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"gopkg.in/yaml.v3"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

type verbFlags struct {
	namespace, name, hosts, spec, output string
	wait, noWait, plan                   bool
	timeout                              time.Duration
	rollout                              rolloutFlags
}

// verbs maps the ergonomic commands to what they send.
var verbs = []struct {
	name, short string
	api         string
	op          proc.OpType
}{
	{"start", "Start a registered process on hosts (op_type 0)", gseapi.APIOperateProcess, proc.OpStart},
	{"stop", "Stop a process on hosts (op_type 1)", gseapi.APIOperateProcess, proc.OpStop},
	{"status", "Report a process's status on hosts (op_type 2)", gseapi.APIOperateProcess, proc.OpStatus},
	{"restart", "Restart a process on hosts (op_type 7)", gseapi.APIOperateProcess, proc.OpRestart},
	{"reload", "Reload a process on hosts (op_type 8)", gseapi.APIOperateProcess, proc.OpReload},
	{"kill", "Kill a process on hosts (op_type 9)", gseapi.APIOperateProcess, proc.OpKill},
	{"register", "Register a process's spec on hosts (register_proc_info; --spec FILE)", gseapi.APIRegisterProcInfo, proc.OpSpecRegister},
	{"unregister", "Remove a process's spec from hosts (unregister_proc_info)", gseapi.APIUnregisterProcInfo, proc.OpSpecUnregister},
}

func newVerbCommands() []*cobra.Command {
	var cmds []*cobra.Command
	for _, v := range verbs {
		v := v
		var f verbFlags
		cmd := &cobra.Command{
			Use:   v.name + " --namespace NS --name NAME --hosts SELECTOR",
			Short: v.short,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return runVerb(cmd, v.api, v.op, f)
			},
		}
		addVerbFlags(cmd, &f)
		fl := cmd.Flags()
		fl.BoolVar(&f.plan, "plan", false, "print what each host would run, grouped, and change nothing")
		if gseapi.RolloutOp(v.op) == nil {
			f.rollout.add(fl)
		}
		if v.op == proc.OpSpecRegister {
			fl.StringVar(&f.spec, "spec", "", "register_proc_info's spec object, as a JSON or YAML file")
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// addVerbFlags adds the flags every verb shares: the process, the hosts,
// waiting and the output format.
func addVerbFlags(cmd *cobra.Command, f *verbFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.namespace, "namespace", "", "process namespace (meta.namespace)")
	fl.StringVar(&f.name, "name", "", "process name (meta.name)")
	fl.StringVar(&f.hosts, "hosts", "all", hostsUsage)
	fl.BoolVar(&f.wait, "wait", false, "wait and show progress (the default on a terminal, and for status and logs everywhere)")
	fl.BoolVar(&f.noWait, "no-wait", false, "print the task id and return (the default of a write verb whose stderr is not a terminal)")
	fl.StringVarP(&f.output, "output", "o", "table", "result format: table, wide (status: start time, threads, cmdline), json or yaml")
	fl.DurationVar(&f.timeout, "timeout", 0, "give up waiting after this long (0: no limit)")
	completeProcessFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "wide", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
}

func runVerb(cmd *cobra.Command, api string, op proc.OpType, f verbFlags) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	cfg, err := loadConfig(cmd)
	if err != nil {
		return err
	}
	inv, err := loadInventory(cfg)
	if err != nil {
		return err
	}
	var hosts []inventory.Host
	var unresolved []string
	if f.plan {
		// A plan names every term it could not resolve instead of
		// refusing the whole selector.
		hosts, unresolved = selectEach(inv, f.hosts)
	} else if hosts, err = inv.Select(f.hosts); err != nil {
		return &ExitError{Code: ExitBadRequest, Err: err}
	}
	ctx, cancel := withTimeout(cmd, f.timeout)
	defer cancel()
	if f.plan && len(hosts) == 0 {
		return printPlan(cmd.OutOrStdout(), &gseapi.Task{API: api, Op: op}, nil, unresolved)
	}
	body, err := verbBody(api, op, f, hosts)
	if err != nil {
		return &ExitError{Code: ExitBadRequest, Err: err}
	}
	task, err := gseapi.DecodeTask(api, body)
	if err != nil {
		return &ExitError{Code: ExitBadRequest, Err: err}
	}
	var roll policies.Rollout
	rolling := false
	if f.rollout.fs != nil {
		if roll, rolling, err = f.rollout.policy(op, len(task.Items)); err != nil {
			return &ExitError{Code: ExitBadRequest, Err: err}
		}
	}
	if f.plan {
		if err := runPlan(ctx, cmd.OutOrStdout(), cfg, task, inv, unresolved); err != nil || !rolling {
			return err
		}
		return printRolloutPlan(cmd.OutOrStdout(), roll, task)
	}
	if rolling {
		return runTask(cmd, cfg, task, f, &roll, printRecap)
	}
	return runTask(cmd, cfg, task, f, nil, printRecap)
}

// runTask starts an accepted task, as a rollout when roll is set, and,
// when waiting, prints its results with print; the exit code says whether
// every host succeeded.
func runTask(cmd *cobra.Command, cfg config.Config, task *gseapi.Task, f verbFlags, roll *policies.Rollout,
	print func(io.Writer, *gseapi.Task, map[string]proc.HostResult, string) error) error {
	ctx, eng, done, err := dialWithin(cmd, cfg, nil, f.timeout)
	if err != nil {
		return err
	}
	defer done()
	// A read verb prints its answer wherever its output goes (a cron job,
	// a CI step); a write verb waits only on a terminal, and in a script
	// prints the task id for the script to follow.
	read := task.Op == proc.OpStatus || task.Op == proc.OpLogs
	onTerminal := isTerminal(cmd.ErrOrStderr())
	wait := f.wait || (!f.noWait && (onTerminal || read)) || gseapi.Synchronous(task.API)
	var id string
	if roll != nil {
		id, err = eng.StartRollout(ctx, task, *roll)
	} else {
		id, err = eng.Start(ctx, task)
	}
	if err != nil {
		return &ExitError{Code: ExitUnavailable, Err: err}
	}
	if roll != nil && wait {
		// Waiting may last as long as an approval does: say how to steer it.
		fmt.Fprintf(cmd.ErrOrStderr(), "rollout %s: `starter rollout status|pause|resume|approve|abort %s`\n", id, id)
	}
	if !wait {
		fmt.Fprintln(cmd.OutOrStdout(), id)
		return nil
	}
	progress := cmd.ErrOrStderr()
	if !f.wait && !onTerminal {
		progress = io.Discard // a script's stderr gets errors, not a progress bar
	}
	res, err := waitWithProgress(ctx, eng, id, len(task.Items), progress)
	if err != nil {
		return &ExitError{Code: ExitUnavailable, Err: err}
	}
	if err := print(cmd.OutOrStdout(), task, res, f.output); err != nil {
		return err
	}
	for _, r := range res {
		if r.Failed() {
			return &ExitError{Code: ExitHostsFailed}
		}
	}
	return nil
}

// verbBody builds the documented request body for the selected hosts.
func verbBody(api string, op proc.OpType, f verbFlags, hosts []inventory.Host) ([]byte, error) {
	req := hostsBody(f, hosts)
	switch api {
	case gseapi.APIOperateProcess:
		req["op_type"] = int(op)
	case gseapi.APIRegisterProcInfo:
		if f.spec == "" {
			return nil, fmt.Errorf("--spec: required for register")
		}
		raw, err := os.ReadFile(f.spec)
		if err != nil {
			return nil, fmt.Errorf("--spec %s: %w", f.spec, err)
		}
		var spec any
		if err := yaml.Unmarshal(raw, &spec); err != nil {
			return nil, fmt.Errorf("--spec %s: %w", f.spec, err)
		}
		req["spec"] = spec
	}
	return json.Marshal(req)
}

// metaHostsBody is the request naming f's process on the hosts f selects.
func metaHostsBody(cfg config.Config, f verbFlags) (map[string]any, error) {
	inv, err := inventory.Load(cfg.Inventory)
	if err != nil {
		return nil, err
	}
	hosts, err := inv.Select(f.hosts)
	if err != nil {
		return nil, err
	}
	return hostsBody(f, hosts), nil
}

// hostsBody is the request naming f's process on hosts.
func hostsBody(f verbFlags, hosts []inventory.Host) map[string]any {
	refs := make([]map[string]any, len(hosts))
	for i, h := range hosts {
		refs[i] = map[string]any{"ip": h.IP, "bk_cloud_id": h.CloudID, "bk_supplier_id": h.SupplierID}
	}
	return map[string]any{"meta": map[string]any{"namespace": f.namespace, "name": f.name}, "hosts": refs}
}

// waitWithProgress polls the task's counts, drawing done/failed/total on
// w, and reads every host's result once, when all are done: reading them
// on every tick would cost a large task's every chunk each time.
func waitWithProgress(ctx context.Context, eng *engine.Engine, id string, total int, w io.Writer) (map[string]proc.HostResult, error) {
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	var last workflows.Counts
	for {
		cnt, err := eng.Counts(ctx, id)
		switch {
		case errors.Is(err, engine.ErrCountsLate):
			// Busy, not gone: the bar stays as it was until the next tick.
			cnt = last
		case err != nil:
			return nil, err
		case cnt.Done < last.Done:
			// A busy chunk that did not answer this time counts as
			// none done: the bar never goes back.
			cnt = last
		}
		last = cnt
		fmt.Fprintf(w, "\r%s  %s %d/%d done, %d failed", id, bar(cnt.Done, total, 30), cnt.Done, total, cnt.Failed)
		if cnt.Done >= total {
			// Waiting: the task answers once its last chunk has.
			list, err := eng.Results(ctx, id, true)
			fmt.Fprintln(w)
			if err != nil {
				return nil, err
			}
			return proc.ByKey(list), nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

func bar(done, total, width int) string {
	if total == 0 {
		return "[" + strings.Repeat("=", width) + "]"
	}
	n := done * width / total
	return "[" + strings.Repeat("=", n) + strings.Repeat(" ", width-n) + "]"
}

// recapRow is one host's line of the recap.
type recapRow struct {
	Key     string    `json:"key" yaml:"key"`
	Code    proc.Code `json:"error_code" yaml:"error_code"`
	Message string    `json:"error_msg" yaml:"error_msg"`
	Content string    `json:"content,omitempty" yaml:"content,omitempty"`
}

// printRecap prints one line per host and the counts by outcome.
func printRecap(w io.Writer, task *gseapi.Task, res map[string]proc.HostResult, format string) error {
	rows := make([]recapRow, 0, len(task.Items))
	for _, it := range task.Items {
		r := res[it.Key()]
		rows = append(rows, recapRow{Key: it.Key(), Code: r.Code, Message: r.Message, Content: r.Content})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Key < rows[j].Key })
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case "yaml":
		return yaml.NewEncoder(w).Encode(rows)
	}
	if task.Op == proc.OpStatus && task.API == gseapi.APIOperateProcess {
		if err := printStatusTable(w, rows, format == "wide"); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "HOST\tCODE\tMESSAGE")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", r.Key, r.Code, r.Message)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	counts := map[proc.Code]int{}
	for _, r := range rows {
		counts[r.Code]++
	}
	_, err := fmt.Fprintf(w, "%d hosts: %s\n", len(rows), countsLine(counts))
	return err
}

// countsLine is the recap's hosts by outcome: "2 success (0), 1 ...".
func countsLine(counts map[proc.Code]int) string {
	codes := make([]int, 0, len(counts))
	for c := range counts {
		codes = append(codes, int(c))
	}
	sort.Ints(codes)
	parts := make([]string, 0, len(codes))
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d %s (%d)", counts[proc.Code(c)], proc.Code(c).Message(), c))
	}
	return strings.Join(parts, ", ")
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
