package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/api/serviceerror"
)

func TestWhileBusyTriesAgainOnlyWhenTheServerDidNotAnswer(t *testing.T) {
	stalled := fmt.Errorf("start: %w", context.DeadlineExceeded)
	cases := []struct {
		name  string
		errs  []error // what each try returns; the last repeats
		tries int
		want  error
	}{
		{"answered at once", []error{nil}, 1, nil},
		{"two stalls, then started", []error{stalled, serviceerror.NewUnavailable("shed"), nil}, 3, nil},
		{"shed by a rate limit, then started", []error{serviceerror.NewResourceExhausted(0, "busy"), nil}, 2, nil},
		{"a bad request is not tried again", []error{serviceerror.NewInvalidArgument("input too large")}, 1, serviceerror.NewInvalidArgument("input too large")},
	}
	for _, c := range cases {
		tries := 0
		err := whileBusy(context.Background(), func(context.Context) error {
			e := c.errs[min(tries, len(c.errs)-1)]
			tries++
			return e
		})
		if tries != c.tries || (err == nil) != (c.want == nil) || (err != nil && err.Error() != c.want.Error()) {
			t.Errorf("%s: %d tries, %v; want %d, %v", c.name, tries, err, c.tries, c.want)
		}
	}
}

func TestWhileBusyStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tries := 0
	err := whileBusy(ctx, func(context.Context) error {
		tries++
		cancel()
		return serviceerror.NewUnavailable("shed")
	})
	var un *serviceerror.Unavailable
	if tries != 1 || !errors.As(err, &un) {
		t.Errorf("%d tries, %v; want 1 and the server's error", tries, err)
	}
}
