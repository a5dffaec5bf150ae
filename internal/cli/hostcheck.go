package cli

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/proc"
)

// checkAPI names the host check's tasks (the task memo's api): it is
// drover's own, not a GSE API.
const checkAPI = "hosts_check"

func newHostsCheckCommand() *cobra.Command {
	var selector, output string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check [--hosts SELECTOR] [-o table|json]",
		Short: "Check that the workers can reach, verify, log in to and switch accounts on every selected host",
		Long: "Check every selected host the way ops reach it, from the workers: connect (117 when it\n" +
			"cannot), verify the host key (9102), log in (9101), and run a command as each account\n" +
			"the host's registered specs (and its inventory account) run as, through the sudo ops\n" +
			"use (9103 when refused). A host not in the workers' inventory answers 9104. Prints the\n" +
			"hosts that failed, then the failures grouped by code, each with a one-line fix.\n" +
			"Exits 0 when every host passed, 1 when any failed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHostsCheck(cmd, selector, output, timeout)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&selector, "hosts", "all", hostsUsage)
	fl.StringVarP(&output, "output", "o", "table", "result format: table or json")
	fl.DurationVar(&timeout, "timeout", 0, "give up waiting after this long (0: no limit)")
	completeProcessFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func runHostsCheck(cmd *cobra.Command, selector, output string, timeout time.Duration) error {
	if output != "table" && output != "json" {
		return &ExitError{Code: ExitBadRequest, Err: fmt.Errorf("-o %q: must be table or json", output)}
	}
	cfg, _, hosts, err := selectHosts(cmd, selector)
	if err != nil {
		return err
	}
	task := &gseapi.Task{API: checkAPI, Op: proc.OpCheck}
	for _, h := range hosts {
		task.Items = append(task.Items, proc.Item{Target: proc.Target{CloudID: h.CloudID, SupplierID: h.SupplierID, IP: h.IP}})
	}
	ctx, eng, done, err := dialWithin(cmd, cfg, nil, timeout)
	if err != nil {
		return err
	}
	defer done()
	id, err := eng.Start(ctx, task)
	if err != nil {
		return &ExitError{Code: ExitUnavailable, Err: err}
	}
	progress := cmd.ErrOrStderr()
	if !isTerminal(progress) {
		progress = io.Discard // a script's stderr gets errors, not a progress bar
	}
	res, err := waitWithProgress(ctx, eng, id, len(task.Items), progress)
	if err != nil {
		return &ExitError{Code: ExitUnavailable, Err: err}
	}
	recap := checkRecapOf(id, task.Items, res)
	if output == "json" {
		err = printJSON(cmd, recap)
	} else {
		err = recap.print(cmd.OutOrStdout())
	}
	if err != nil {
		return err
	}
	if recap.Failed > 0 {
		return &ExitError{Code: ExitHostsFailed}
	}
	return nil
}

// checkRecap is a host check's outcome: every host's result, and the
// failures grouped by code.
type checkRecap struct {
	TaskID   string         `json:"task_id"`
	Passed   int            `json:"passed"`
	Failed   int            `json:"failed"`
	Hosts    []checkedHost  `json:"hosts"`
	Failures []checkFailure `json:"failures"`
}

type checkedHost struct {
	Host    string            `json:"host"`
	Code    proc.Code         `json:"error_code"`
	Message string            `json:"error_msg"`
	Report  *proc.CheckReport `json:"report,omitempty"`
}

// checkFailure is the hosts that failed with one code, and the fix.
type checkFailure struct {
	Code  proc.Code `json:"error_code"`
	Kind  string    `json:"kind"`
	Fix   string    `json:"fix"`
	Hosts []string  `json:"hosts"`
}

func checkRecapOf(id string, items []proc.Item, res map[string]proc.HostResult) checkRecap {
	out := checkRecap{TaskID: id, Hosts: []checkedHost{}, Failures: []checkFailure{}}
	groups := map[proc.Code]*checkFailure{}
	accounts := map[proc.Code][]string{}
	for _, it := range items {
		r := res[it.Key()]
		h := checkedHost{Host: it.Target.HostID().String(), Code: r.Code, Message: r.Message}
		if rep, ok := proc.DecodeCheckReport(r.Content); ok {
			h.Report = &rep
			for _, f := range rep.Failed {
				if f.Account != "" && !slices.Contains(accounts[f.Code], f.Account) {
					accounts[f.Code] = append(accounts[f.Code], f.Account)
				}
			}
		}
		out.Hosts = append(out.Hosts, h)
		if r.Code == proc.CodeSuccess {
			out.Passed++
			continue
		}
		out.Failed++
		g := groups[r.Code]
		if g == nil {
			g = &checkFailure{Code: r.Code, Kind: r.Code.Message()}
			groups[r.Code] = g
		}
		g.Hosts = append(g.Hosts, h.Host)
	}
	for code, g := range groups {
		g.Fix = checkFix(code, accounts[code])
		out.Failures = append(out.Failures, *g)
	}
	sort.Slice(out.Failures, func(i, j int) bool { return out.Failures[i].Code < out.Failures[j].Code })
	return out
}

// checkFix is the one-line fix for hosts that failed the check with code;
// accounts are the accounts that failed with it, if any.
func checkFix(code proc.Code, accounts []string) string {
	switch code {
	case proc.CodeUnreachable:
		return "cannot connect: check the address and port, that sshd (or WinRM) runs there, and the bastion if any"
	case proc.CodeHostKey:
		return "host key changed or unknown: check the host, then update known_hosts (ssh-keygen -R HOST; ssh-keyscan -p PORT HOST >> KNOWN_HOSTS); for WinRM, its certificate and ca_file"
	case proc.CodeAuthFailed:
		return "login refused: check identity_file/certificate_file (password_env for WinRM) and the login's authorized_keys"
	case proc.CodeSudoRefused:
		return fmt.Sprintf("sudo refused for %s: add a sudoers rule for the login user (LOGIN ALL=(ACCOUNT) NOPASSWD: ALL)", strings.Join(accounts, ", "))
	case proc.CodeUnknownHost:
		return "not in the workers' inventory: add it there, or have the workers reload theirs"
	case proc.CodeTimeout:
		return "connected, but a command did not finish in time: check the host's load and sshd's MaxSessions"
	case proc.CodeBadSpec:
		return "the login cannot run ops' commands: give the login user a POSIX shell, or reach the host over its own transport"
	case proc.CodeHostLost:
		return "host workflow closed: `starter host restore CLOUD:IP`, or start it over with `starter host forget CLOUD:IP`"
	case proc.CodeCommandFailed:
		return "logged in, but a command failed: see the host's message"
	}
	return "see the host's message (and the worker's log)"
}

// print writes the failed hosts, one a line, then the recap by code.
func (r checkRecap) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if r.Failed > 0 {
		fmt.Fprintln(tw, "HOST\tCODE\tMESSAGE")
		for _, h := range r.Hosts {
			if h.Code != proc.CodeSuccess {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", h.Host, h.Code, h.Message)
			}
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "%d hosts checked: %d passed, %d failed\n", len(r.Hosts), r.Passed, r.Failed)
	for _, f := range r.Failures {
		fmt.Fprintf(tw, "%d %s\t%d %s\t%s\n", f.Code, f.Kind, len(f.Hosts), plural(len(f.Hosts), "host"), f.Fix)
	}
	return tw.Flush()
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
