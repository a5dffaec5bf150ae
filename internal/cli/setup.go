package cli

import (
	"context"
	"fmt"
	"io"
	"sort"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"

	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/workflows"
)

var saTypes = map[string]enumspb.IndexedValueType{
	"Keyword":     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"KeywordList": enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	"Int":         enumspb.INDEXED_VALUE_TYPE_INT,
}

// Setup registers drover's search attributes in the namespace through the
// operator API, once per cluster. Attributes already there are left alone.
func Setup(ctx context.Context, cfg config.Config, out io.Writer) error {
	c, err := Dial(cfg, config.Config{LogLevel: "error", LogFormat: "text"}.Logger())
	if err != nil {
		return err
	}
	defer c.Close()
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
