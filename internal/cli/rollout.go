package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/drover-sh/drover/gseapi"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// rolloutFlags are a control verb's rollout options.
type rolloutFlags struct {
	canary         int
	batch, maxFail string
	minHealthy     time.Duration
	pause          time.Duration
	approveAfter   bool
	fs             *pflag.FlagSet
}

func (r *rolloutFlags) add(fl *pflag.FlagSet) {
	r.fs = fl
	fl.IntVar(&r.canary, "canary", 0, "rollout: run this many hosts first, in a batch of their own")
	fl.StringVar(&r.batch, "batch", "", "rollout: hosts per batch after the canary, a count or a percentage (10%)")
	fl.StringVar(&r.maxFail, "max-fail", "0", "rollout: stop before the next batch once more hosts than this failed, a count or a percentage")
	fl.DurationVar(&r.minHealthy, "min-healthy", 0, "rollout: each host must stay alive (and healthy) this long after the op")
	fl.DurationVar(&r.pause, "pause", 0, "rollout: wait this long between batches")
	fl.BoolVar(&r.approveAfter, "approve-after-canary", false, "rollout: hold after the canary until `starter rollout approve`")
}

// policy is the rollout the flags ask for; ok is false when none of them
// was given (the op runs on every host at once, as always).
func (r *rolloutFlags) policy(op proc.OpType, total int) (policies.Rollout, bool, error) {
	any := false
	for _, n := range []string{"canary", "batch", "max-fail", "min-healthy", "pause", "approve-after-canary"} {
		any = any || r.fs.Changed(n)
	}
	if !any {
		return policies.Rollout{}, false, nil
	}
	if err := gseapi.RolloutOp(op); err != nil {
		return policies.Rollout{}, false, fmt.Errorf("--canary/--batch: op_type %w", err)
	}
	p := policies.Rollout{Canary: r.canary, MinHealthy: r.minHealthy, Pause: r.pause, ApproveAfterCanary: r.approveAfter}
	var err error
	if r.batch != "" {
		if p.Batch, err = policies.ParseSize("--batch", r.batch); err != nil {
			return p, false, err
		}
	}
	if p.MaxFail, err = policies.ParseSize("--max-fail", r.maxFail); err != nil {
		return p, false, err
	}
	if err := p.ValidateFor("rollout ", total); err != nil {
		return p, false, err
	}
	return p, true, nil
}

func newRolloutCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "rollout status|pause|resume|approve|abort TASK_ID",
		Short: "Show or steer a rollout: its state and counts, or pause, resume, approve, abort",
		Long: "A rollout is a control verb run with --canary/--batch (or the HTTP rollout endpoint).\n" +
			"pause holds it before its next batch, resume lets it go on, approve releases it\n" +
			"after the canary, abort ends it before its next batch: the hosts it never reached\n" +
			"answer 9111. Every answer is the rollout's status, as the HTTP endpoint gives it.",
		Args:      cobra.ExactArgs(2),
		ValidArgs: gseapi.RolloutActions,
		RunE: func(cmd *cobra.Command, args []string) error {
			action, id := args[0], args[1]
			valid := false
			for _, a := range gseapi.RolloutActions {
				valid = valid || a == action
			}
			if !valid {
				return reject(cmd, fmt.Errorf("action %q: must be one of status, pause, resume, approve, abort", action))
			}
			if err := gseapi.ValidTaskID(id); err != nil {
				return reject(cmd, err)
			}
			body, _ := json.Marshal(map[string]string{"task_id": id})
			return callEngine(cmd, func(ctx context.Context, eng *engine.Engine) (gseapi.Response, gseapi.Outcome) {
				return gseapi.RolloutCall(ctx, eng, action, body, nil)
			})
		},
	}
}

// printRolloutPlan prints the batches a rollout would run, in order.
func printRolloutPlan(w io.Writer, r policies.Rollout, task *gseapi.Task) error {
	sizes := policies.Batches(len(task.Items), r)
	b := &strings.Builder{}
	fmt.Fprintf(b, "\nRollout: %s", countOf(len(sizes), "batch", "batches"))
	if r.Canary > 0 {
		fmt.Fprintf(b, ", the canary first")
	}
	fmt.Fprintf(b, "; stops before the next batch once more than %s of its hosts have failed", r.MaxFail)
	if r.MinHealthy > 0 {
		fmt.Fprintf(b, "; each host must stay alive and healthy %s after its op", r.MinHealthy)
	}
	if r.ApproveAfterCanary {
		b.WriteString("; waits for approval after the canary")
	}
	if r.Pause > 0 {
		fmt.Fprintf(b, "; pauses %s between batches", r.Pause)
	}
	b.WriteString(".\n")
	start := 0
	for i, n := range sizes {
		first, last := task.Items[start].Key(), task.Items[start+n-1].Key()
		span := first
		if n > 1 {
			span += " .. " + last
		}
		fmt.Fprintf(b, "  batch %d: %s: %s\n", i+1, hostCount(n), span)
		start += n
	}
	_, err := io.WriteString(w, b.String())
	return err
}
