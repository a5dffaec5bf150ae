package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/policies"
)

// Query runs a query on a workflow, running or closed, and decodes its
// answer into out, asked again while the engine is busy (ask).
func Query(ctx context.Context, c client.Client, id, queryType string, out any, args ...any) error {
	var resp *client.QueryWorkflowWithOptionsResponse
	err := ask(ctx, func(ctx context.Context) (err error) {
		resp, err = c.QueryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{WorkflowID: id, QueryType: queryType, Args: args})
		return err
	})
	if err != nil {
		return err
	}
	return resp.QueryResult.Get(out)
}

// QueryOpen runs a query on a running workflow and decodes its answer into
// out, asked again while the engine is busy (ask). A workflow that does
// not exist or has closed answers found=false: asking a closed one would
// wait for a replay on a queue nobody may poll.
func QueryOpen(ctx context.Context, c client.Client, id, queryType string, out any, args ...any) (found bool, err error) {
	err = ask(ctx, func(ctx context.Context) (err error) {
		found, err = QueryOpenOnce(ctx, c, id, queryType, out, args...)
		return err
	})
	return found, err
}

// QueryOpenOnce is one try of QueryOpen, for a caller that has its own
// way to go on when the engine does not answer in time.
func QueryOpenOnce(ctx context.Context, c client.Client, id, queryType string, out any, args ...any) (found bool, err error) {
	resp, err := c.QueryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: id, QueryType: queryType, Args: args, QueryRejectCondition: enums.QUERY_REJECT_CONDITION_NOT_OPEN})
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: %w", id, err)
	case resp.QueryRejected != nil:
		return false, nil
	}
	return true, resp.QueryResult.Get(out)
}

// ask tries a query while the engine is busy (WhileBusy), until ctx's
// deadline or, when it has none, policies.QueryBudget. The SDK gives up on
// one try after at most 10 s, but the server holds a query while its
// workflow has a task pending, and a task on the sticky queue of a worker
// that died waits there policies.StickyScheduleToStart.
func ask(ctx context.Context, try func(ctx context.Context) error) error {
	budget := policies.QueryBudget
	if deadline, ok := ctx.Deadline(); ok {
		budget = time.Until(deadline)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, budget)
		defer cancel()
	}
	return WhileBusy(ctx, budget, try)
}
