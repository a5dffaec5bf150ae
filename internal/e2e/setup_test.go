package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"

	"github.com/drover-sh/drover/internal/cli"
	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/workflows"
)

func TestWorkerSetupRegistersSearchAttributes(t *testing.T) {
	bare := testbed.NewTemporal(t, testbed.TemporalOptions{}) // none registered
	cfg := config.Config{TemporalAddress: bare.Address, TemporalNamespace: "default", LogFormat: "text", LogLevel: "error"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := cli.Setup(ctx, cfg, false, &out); err != nil || !strings.Contains(out.String(), "added") {
		t.Fatalf("setup: %v %s", err, out.String())
	}
	c, err := cli.Dial(cfg, config.Config{LogLevel: "error", LogFormat: "text"}.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for name := range workflows.SearchAttributeTypes {
		if _, ok := have.CustomAttributes[name]; !ok {
			t.Fatalf("%s not registered: %v", name, have.CustomAttributes)
		}
	}
	out.Reset()
	if err := cli.Setup(ctx, cfg, false, &out); err != nil || !strings.Contains(out.String(), "already has") {
		t.Fatalf("second setup: %v %s", err, out.String())
	}
}
