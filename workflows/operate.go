package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
)

// operation is the workflow's state: one slot per item, filled as hosts finish.
type operation struct {
	in      OperateInput
	results []proc.HostResult
	done    int
}

// Operate runs one op over every item, at most policies.MaxInFlight hosts at
// a time, and never fails because a host did: each host ends with a code.
func Operate(ctx workflow.Context, in OperateInput) (OperateResult, error) {
	op := &operation{in: in, results: make([]proc.HostResult, len(in.Items))}
	for i := range op.results {
		op.results[i] = proc.Pending()
	}
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (OperateResult, error) {
		return op.snapshot(), nil
	}); err != nil {
		return OperateResult{}, err
	}
	op.run(ctx)
	return op.snapshot(), nil
}

func (op *operation) run(ctx workflow.Context) {
	sel := workflow.NewSelector(ctx)
	inFlight := 0
	for i := range op.in.Items {
		if inFlight >= policies.MaxInFlight {
			sel.Select(ctx)
			inFlight--
		}
		i := i
		fut := op.start(ctx, i)
		inFlight++
		sel.AddFuture(fut, func(f workflow.Future) {
			var res proc.HostResult
			if err := f.Get(ctx, &res); err != nil {
				res = activityFailure(err)
			}
			op.results[i] = res
			op.done++
		})
	}
	for ; inFlight > 0; inFlight-- {
		sel.Select(ctx)
	}
}

func (op *operation) start(ctx workflow.Context, i int) workflow.Future {
	item := op.in.Items[i]
	spec := policies.WithDefaults(item.Spec)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: policies.HostOpDeadline(op.in.Op, spec),
		HeartbeatTimeout:    policies.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumAttempts:    3,
		},
	})
	var a *activities.Activities
	return workflow.ExecuteActivity(actx, a.HostOp, activities.HostOpInput{
		TaskID: op.in.TaskID, Op: op.in.Op, Target: item.Target, Process: item.Process, Spec: item.Spec,
	})
}

func (op *operation) snapshot() OperateResult {
	out := OperateResult{TaskID: op.in.TaskID, Done: op.done, Total: len(op.in.Items)}
	out.Results = make([]KeyedResult, len(op.in.Items))
	for i, it := range op.in.Items {
		out.Results[i] = KeyedResult{Key: it.Key(), HostResult: op.results[i]}
	}
	return out
}

// activityFailure turns an activity that could not report a result (worker
// lost past its retries, timeout) into that host's code.
func activityFailure(err error) proc.HostResult {
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return proc.Fail(proc.CodeTimeout, "host did not answer within the op deadline (%s)", te.TimeoutType())
	}
	return proc.Fail(proc.CodeInternal, "%v", err)
}
