package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// queryClient fails the first len(errs) tries of a query with errs, in
// order, then answers "ok".
type queryClient struct {
	client.Client
	errs  []error
	tries atomic.Int64
}

func (q *queryClient) QueryWorkflowWithOptions(ctx context.Context, _ *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	n := int(q.tries.Add(1))
	if n <= len(q.errs) {
		return nil, q.errs[n-1]
	}
	return &client.QueryWorkflowWithOptionsResponse{QueryResult: jsonValue(`"ok"`)}, nil
}

func TestQueryAsksAgainWhileTheEngineIsBusy(t *testing.T) {
	late := serviceerror.NewDeadlineExceeded("context deadline exceeded")
	for _, tc := range []struct {
		name      string
		errs      []error
		wantTries int64
		wantErr   bool
	}{
		{"answers at once", nil, 1, false},
		{"server's try deadline, twice", []error{late, late}, 3, false},
		{"client's try deadline", []error{context.DeadlineExceeded}, 2, false},
		{"server restarting", []error{serviceerror.NewUnavailable("connection refused")}, 2, false},
		{"refused", []error{serviceerror.NewInvalidArgument("bad query")}, 1, true},
		{"refused after a timeout", []error{late, serviceerror.NewInvalidArgument("bad query")}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &queryClient{errs: tc.errs}
			var got string
			err := Query(context.Background(), q, "wf", "status", &got)
			if (err != nil) != tc.wantErr || q.tries.Load() != tc.wantTries {
				t.Fatalf("err %v after %d tries; want error %v after %d", err, q.tries.Load(), tc.wantErr, tc.wantTries)
			}
			if !tc.wantErr && got != "ok" {
				t.Fatalf("answer %q", got)
			}
		})
	}
}

// A caller's deadline bounds the tries: past it the last try's error is
// the answer.
func TestQueryStopsAtTheCallersDeadline(t *testing.T) {
	late := serviceerror.NewDeadlineExceeded("context deadline exceeded")
	q := &queryClient{errs: make([]error, 1000)}
	for i := range q.errs {
		q.errs[i] = late
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var got string
	_, err := QueryOpen(ctx, q, "wf", "status", &got)
	var de *serviceerror.DeadlineExceeded
	if !errors.As(err, &de) {
		t.Fatalf("QueryOpen returned %v, want the last try's deadline", err)
	}
	if n := q.tries.Load(); n < 2 || n >= 1000 {
		t.Fatalf("%d tries in the caller's second", n)
	}
}

// A query to a workflow that does not exist is not asked again.
func TestQueryOpenOfAMissingWorkflow(t *testing.T) {
	q := &queryClient{errs: []error{serviceerror.NewNotFound("no such workflow")}}
	var got string
	found, err := QueryOpen(context.Background(), q, "wf", "status", &got)
	if found || err != nil || q.tries.Load() != 1 {
		t.Fatalf("found %v, err %v, %d tries", found, err, q.tries.Load())
	}
}
