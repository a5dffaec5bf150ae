package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

type psFlags struct {
	namespace, name, hosts, state, output string
	probe                                 bool
	timeout                               time.Duration
}

// psRow is one registered process on one host.
type psRow struct {
	Host       string `json:"host"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Expected   string `json:"expected"`
	Actual     string `json:"actual"`
	Managed    bool   `json:"managed"`
	GaveUp     bool   `json:"gave_up,omitempty"`
	Pid        int    `json:"pid,omitempty"`
	Restarts   int    `json:"restarts_24h"`
	LastEvent  string `json:"last_event,omitempty"`
	LastAt     int64  `json:"last_event_time,omitempty"`
	Supervised bool   `json:"supervised,omitempty"`
	// SeenAt is when Actual was observed (unix seconds); with --probe, now.
	SeenAt int64 `json:"seen_time,omitempty"`
	// WatchFailedAt is when supervision last failed to poll the host, when
	// that is newer than what it saw of the process.
	WatchFailedAt int64 `json:"watch_failed_time,omitempty"`
	// Message says why a probed process's state is unknown.
	Message string    `json:"message,omitempty"`
	item    proc.Item // for --probe
}

func newPsCommand() *cobra.Command {
	var f psFlags
	cmd := &cobra.Command{
		Use:   "ps [--namespace NS] [--name NAME] [--hosts SELECTOR] [--state running|stopped|failed] [--probe]",
		Short: "List every registered process with its expected and actual state, what is wrong first",
		Long: "List every process registered on the selected hosts: whether it should run (EXPECTED),\n" +
			"whether it does (ACTUAL), whether drover supervises it, restarts in the last 24 h and the\n" +
			"last supervision event. Processes that should run and do not come first.\n\n" +
			"Without --probe, ps reads what drover already knows, from the host workflows' memos in one\n" +
			"listing: a supervised process is current (SEEN says supervised); any other shows what the\n" +
			"last op saw, SEEN ago. --probe asks the hosts live (a status op) instead.\n\n" +
			"--state failed: should run but does not, or supervision gave up on it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runPs(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.namespace, "namespace", "", "only processes of this namespace")
	fl.StringVar(&f.name, "name", "", "only processes of this name")
	fl.StringVar(&f.hosts, "hosts", "all", hostsUsage)
	fl.StringVar(&f.state, "state", "", "only processes in this state: running, stopped or failed")
	fl.BoolVar(&f.probe, "probe", false, "ask the hosts live instead of reading what drover knows")
	fl.StringVarP(&f.output, "output", "o", "table", "table or json")
	fl.DurationVar(&f.timeout, "timeout", 0, "give up after this long (0: no limit)")
	completeProcessFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions([]string{"running", "stopped", "failed"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func runPs(cmd *cobra.Command, f psFlags) error {
	switch {
	case f.output != "table" && f.output != "json":
		return &ExitError{Code: ExitBadRequest, Err: fmt.Errorf("-o %q: must be table or json", f.output)}
	case f.state != "" && f.state != workflows.StateRunning && f.state != workflows.StateStopped && f.state != "failed":
		return &ExitError{Code: ExitBadRequest, Err: fmt.Errorf("--state %q: must be running, stopped or failed", f.state)}
	}
	cfg, _, hosts, err := selectHosts(cmd, f.hosts)
	if err != nil {
		return err
	}
	selected := hostIDs(hosts)
	opts, err := cfg.ClientOptions()
	if err != nil {
		return &ExitError{Code: ExitBadRequest, Err: err}
	}
	ctx, eng, done, err := dialWithin(cmd, cfg, nil, f.timeout)
	if err != nil {
		return err
	}
	defer done()
	// The memos are payloads: with payload encryption on, the converter
	// that holds the key decodes them.
	digests, err := engine.ListDigests(ctx, eng.Client, opts.DataConverter, cfg.TaskQueue, func(h proc.HostID) bool { return selected[h] })
	if err != nil {
		return &ExitError{Code: ExitUnavailable, Err: err}
	}
	now := time.Now()
	rows := psRows(digests, f, now)
	if f.probe && len(rows) > 0 {
		if err := probeRows(ctx, eng, rows, cmd.ErrOrStderr(), now); err != nil {
			return &ExitError{Code: ExitUnavailable, Err: err}
		}
	}
	rows = filterState(rows, f.state)
	sortRows(rows)
	if f.output == "json" {
		return printJSON(cmd, rows)
	}
	return printPs(cmd.OutOrStdout(), rows, f.probe, now)
}

// psRows turns digests into rows, keeping the processes the flags ask for.
func psRows(digests []engine.HostDigest, f psFlags, now time.Time) []psRow {
	rows := []psRow{}
	since := now.Add(-workflows.RestartWindow).Unix()
	for _, hd := range digests {
		for _, p := range hd.Digest.Procs {
			if f.namespace != "" && p.Namespace != f.namespace || f.name != "" && p.Name != f.name {
				continue
			}
			r := psRow{Host: hd.Host.String(), Namespace: p.Namespace, Name: p.Name, Expected: workflows.StateStopped,
				Actual: p.Actual, Managed: p.Managed, GaveUp: p.GaveUp, Pid: p.Pid, LastEvent: p.LastEvent, LastAt: p.LastEventAt,
				Supervised: p.Supervised && p.Actual == workflows.StateRunning, SeenAt: p.SeenAt, WatchFailedAt: hd.Digest.WatchFailedAt,
				item: proc.Item{Target: proc.Target{CloudID: hd.Host.CloudID, SupplierID: p.SupplierID, IP: hd.Host.IP},
					Process: proc.ProcessID{Namespace: p.Namespace, Name: p.Name}}}
			if p.Expected {
				r.Expected = workflows.StateRunning
			}
			if r.Actual == "" {
				r.Actual = workflows.StateUnknown
			}
			if r.Supervised && r.WatchFailedAt > max(r.SeenAt, r.LastAt) {
				// Supervision could not poll the host since it last saw
				// the process: what it saw is all drover knows.
				r.Supervised = false
			} else {
				r.WatchFailedAt = 0
			}
			for _, t := range p.Restarts {
				if t > since {
					r.Restarts++
				}
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// probeRows asks the hosts for every row's process with one status op.
func probeRows(ctx context.Context, eng *engine.Engine, rows []psRow, progress io.Writer, now time.Time) error {
	task := &gseapi.Task{API: gseapi.APIOperateProcess, Op: proc.OpStatus}
	for _, r := range rows {
		task.Items = append(task.Items, r.item)
	}
	id, err := eng.Start(ctx, task)
	if err != nil {
		return err
	}
	var res map[string]proc.HostResult
	if isTerminal(progress) {
		res, err = waitWithProgress(ctx, eng, id, len(task.Items), progress)
	} else {
		var list []proc.KeyedResult
		list, err = eng.Results(ctx, id, true)
		res = proc.ByKey(list)
	}
	if err != nil {
		return err
	}
	for i := range rows {
		r := &rows[i]
		hr := res[r.item.Key()]
		r.SeenAt, r.Supervised, r.WatchFailedAt, r.Pid, r.Message = now.Unix(), false, 0, 0, ""
		switch hr.Code {
		case proc.CodeSuccess:
			r.Actual = workflows.StateRunning
			var c statusFields
			if json.Unmarshal([]byte(hr.Content), &c) == nil && len(c.Process) > 0 && len(c.Process[0].Instance) > 0 {
				r.Pid = c.Process[0].Instance[0].Pid
			}
		case proc.CodeNotRunning:
			r.Actual = workflows.StateStopped
		default:
			r.Actual, r.Message = workflows.StateUnknown, fmt.Sprintf("%d %s", hr.Code, hr.Message)
		}
	}
	return nil
}

// failed: it should run and does not, or supervision gave up on it.
func (r psRow) failed() bool {
	return r.Expected == workflows.StateRunning && r.Actual == workflows.StateStopped || r.GaveUp
}

func filterState(rows []psRow, state string) []psRow {
	if state == "" {
		return rows
	}
	out := []psRow{}
	for _, r := range rows {
		if state == "failed" && r.failed() || r.Actual == state {
			out = append(out, r)
		}
	}
	return out
}

// rank orders rows by how wrong they are: should run and does not; not
// known; runs though it should not; restarted lately; fine.
func (r psRow) rank() int {
	switch {
	case r.failed():
		return 0
	case r.Actual == workflows.StateUnknown && r.Expected == workflows.StateRunning:
		return 1
	case r.Actual == workflows.StateRunning && r.Expected == workflows.StateStopped:
		return 2
	case r.Restarts > 0:
		return 3
	}
	return 4
}

func sortRows(rows []psRow) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.rank() != b.rank() {
			return a.rank() < b.rank()
		}
		if a.Restarts != b.Restarts {
			return a.Restarts > b.Restarts
		}
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

func printPs(w io.Writer, rows []psRow, probed bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tPROCESS\tEXPECTED\tACTUAL\tMANAGED\tPID\tRESTARTS(24h)\tLAST EVENT\tSEEN")
	failed := 0
	for _, r := range rows {
		if r.failed() {
			failed++
		}
		managed := yesNo(r.Managed)
		if r.GaveUp {
			managed = "gave-up"
		}
		pid := "-"
		if r.Pid > 0 && r.Actual == workflows.StateRunning {
			pid = strconv.Itoa(r.Pid)
		}
		last := "-"
		if r.LastEvent != "" {
			last = r.LastEvent + " " + ago(now, r.LastAt)
		}
		seen := "-"
		switch {
		case r.Message != "":
			seen = r.Message
		case probed:
			seen = "live"
		case r.Supervised:
			seen = "supervised"
		case r.WatchFailedAt > 0:
			seen = ago(now, r.SeenAt) + ", supervision failed " + ago(now, r.WatchFailedAt)
		case r.SeenAt > 0:
			seen = ago(now, r.SeenAt)
		}
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Host, r.Namespace, r.Name, r.Expected, r.Actual,
			managed, pid, r.Restarts, last, seen)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	noun := "processes"
	if len(rows) == 1 {
		noun = "process"
	}
	_, err := fmt.Fprintf(w, "%d %s, %d should run and do not\n", len(rows), noun, failed)
	return err
}

// ago is how long before now a unix time was, as uptime prints it.
func ago(now time.Time, unix int64) string {
	d := now.Unix() - unix
	if d < 0 {
		d = 0
	}
	return strings.TrimSpace(uptime(d)) + " ago"
}
