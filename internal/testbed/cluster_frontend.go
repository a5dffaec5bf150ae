package testbed

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
)

// waitFrontend waits until the frontend answers a health check.
func (c *Cluster) waitFrontend(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		cl, err := client.Dial(client.Options{HostPort: c.Address, Namespace: "temporal-system", Logger: quietLogger{}})
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = cl.CheckHealth(ctx, &client.CheckHealthRequest{})
			cancel()
			cl.Close()
			if err == nil {
				return nil
			}
		}
		if c.server.exited() {
			c.server = nil
			return errClusterExited
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("temporal server at %s not ready after %s (log: %s): %v", c.Address, limit, c.ServerLog, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// saTypes are the search attribute types by the names StartTemporal's
// --search-attribute takes.
var saTypes = map[string]enumspb.IndexedValueType{
	"Text":        enumspb.INDEXED_VALUE_TYPE_TEXT,
	"Keyword":     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"Int":         enumspb.INDEXED_VALUE_TYPE_INT,
	"Double":      enumspb.INDEXED_VALUE_TYPE_DOUBLE,
	"Bool":        enumspb.INDEXED_VALUE_TYPE_BOOL,
	"Datetime":    enumspb.INDEXED_VALUE_TYPE_DATETIME,
	"KeywordList": enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}

// namespaceRefresh is how long every service's namespace registry takes to
// see a namespace change (system.namespaceCacheRefreshInterval, 2 s), and a
// margin.
const namespaceRefresh = 3 * time.Second

// setupNamespace registers namespace default with a retention of one day
// and adds the search attributes, then waits for every service to see
// them.
func (c *Cluster) setupNamespace() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.Dial(client.Options{HostPort: c.Address, Logger: quietLogger{}})
	if err != nil {
		return err
	}
	defer cl.Close()
	retry := func(what string, f func() error) error {
		for {
			err := f()
			if err == nil {
				return nil
			}
			var unavailable *serviceerror.Unavailable
			var notFound *serviceerror.NamespaceNotFound
			if !errors.As(err, &unavailable) && !errors.As(err, &notFound) || ctx.Err() != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	if err := retry("register namespace default", func() error {
		_, err := cl.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: "default", WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
		var exists *serviceerror.NamespaceAlreadyExists
		if errors.As(err, &exists) {
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	if err := retry("describe namespace default", func() error {
		_, err := cl.WorkflowService().DescribeNamespace(ctx, describeDefault())
		return err
	}); err != nil {
		return err
	}
	// The frontend adds search attributes with its own namespace registry,
	// which must know the namespace first.
	time.Sleep(namespaceRefresh)
	if len(c.opts.SearchAttributes) > 0 {
		want := map[string]enumspb.IndexedValueType{}
		for name, typ := range c.opts.SearchAttributes {
			t, ok := saTypes[typ]
			if !ok {
				return fmt.Errorf("search attribute %s: unknown type %q", name, typ)
			}
			want[name] = t
		}
		if err := retry("add search attributes", func() error {
			have, err := cl.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
			if err != nil {
				return err
			}
			missing := map[string]enumspb.IndexedValueType{}
			for name, t := range want {
				if _, ok := have.CustomAttributes[name]; !ok {
					missing[name] = t
				}
			}
			if len(missing) == 0 {
				return nil
			}
			_, err = cl.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
				Namespace: "default", SearchAttributes: missing})
			if err == nil {
				// Listed again on the next round, until every one is there.
				err = serviceerror.NewUnavailable("search attributes added, not yet listed")
			}
			return err
		}); err != nil {
			return err
		}
		time.Sleep(namespaceRefresh)
	}
	return nil
}
