package cli

import (
	"context"
	"fmt"
	"io"
	"sort"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/internal/engine"
	"github.com/drover-sh/drover/workflows"
)

var saTypes = map[string]enumspb.IndexedValueType{
	"Keyword":     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"KeywordList": enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	"Int":         enumspb.INDEXED_VALUE_TYPE_INT,
}

// Setup registers drover's search attributes in the namespace through the
// operator API, once per cluster; attributes already there are left alone.
// Run again after an upgrade, it asks host workflows begun before the
// registry digest or specs for a new run that keeps them; with renewAll,
// every host workflow.
func Setup(ctx context.Context, cfg config.Config, renewAll bool, out io.Writer) error {
	c, err := Dial(cfg, config.Config{LogLevel: "error", LogFormat: "text"}.Logger())
	if err != nil {
		return err
	}
	defer c.Close()
	if err := addSearchAttributes(ctx, c, cfg, out); err != nil {
		return err
	}
	n, err := engine.RenewHosts(ctx, c, cfg.TaskQueue, renewAll)
	if err != nil {
		return err
	}
	if n > 0 {
		fmt.Fprintf(out, "asked %d host workflows for a new run (at each one's next op or supervision decision)\n", n)
	}
	return nil
}

func addSearchAttributes(ctx context.Context, c client.Client, cfg config.Config, out io.Writer) error {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: cfg.TemporalNamespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	want := map[string]enumspb.IndexedValueType{}
	names := make([]string, 0, len(workflows.SearchAttributeTypes))
	for name, typ := range workflows.SearchAttributeTypes {
		if _, ok := have.CustomAttributes[name]; ok {
			continue
		}
		want[name] = saTypes[typ]
		names = append(names, name)
	}
	sort.Strings(names)
	if len(want) == 0 {
		fmt.Fprintf(out, "namespace %s already has drover's search attributes\n", cfg.TemporalNamespace)
		return nil
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: cfg.TemporalNamespace, SearchAttributes: want}); err != nil {
		return fmt.Errorf("add search attributes: %w", err)
	}
	fmt.Fprintf(out, "added to namespace %s: %v\n", cfg.TemporalNamespace, names)
	return nil
}
