// Package dispatch runs the activities of drover's task fan-out: handing
// items to host workflows, probing and checking hosts in batches, waiting
// for chunks, holding a rollout's health gate and arming shard watches.
// Workflows schedule them by the names in workflows/protocol.go; a worker
// registers a Dispatcher's methods under those names (Register).
package dispatch

import (
	"context"
	"strings"
	"sync"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/activities"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// Dispatcher hands task items to host workflows, and probes status batches
// itself.
type Dispatcher struct {
	Client    client.Client
	TaskQueue string
	Inventory *inventory.Inventory
	Acts      *activities.Activities
	// Supervision is handed to every host workflow with its requests.
	Supervision workflows.Supervision
	// DataConverter decodes host workflows' memos, as the client encodes
	// payloads; nil means the default.
	DataConverter converter.DataConverter
	// SessionsPerHost is how many execs one SSH connection runs at once
	// (max_sessions_per_host): updates to the hosts of one connection are
	// bounded by it; 0 bounds them by nothing but the worker's total.
	SessionsPerHost int
	conns           connGate

	armsOnce sync.Once
	arms     *armBatcher

	listerOnce sync.Once
	lister     *registryLister

	outboxMu sync.Mutex
	outboxes map[workflow.Execution]*outbox
}

// registryLister is the worker's one lister of registries.
func (d *Dispatcher) registryLister() *registryLister {
	d.listerOnce.Do(func() { d.lister = newRegistryLister(d.Client, d.DataConverter) })
	return d.lister
}

// dispatchParallel bounds concurrent signal-with-start calls per activity.
const dispatchParallel = 32

// unknownHost answers an item whose host the inventory does not have: by
// the agent id the caller sent when nothing mapped it to a host.
func unknownHost(t proc.Target) proc.HostResult {
	if !t.Resolved() {
		return proc.Fail(proc.CodeUnknownHost, "agent id %q is not in the inventory (give its host agent_id, or send <bk_cloud_id>:<ip>)", t.AgentID)
	}
	return proc.Fail(proc.CodeUnknownHost, "host bk_cloud_id=%d ip=%s is not in the inventory", t.CloudID, t.IP)
}

// connector is a Runner that can connect ahead of its first command.
type connector interface {
	Connect(ctx context.Context, host inventory.Host) error
}

// oneLine keeps an error's text on one line: per-host messages are rows of
// a table or lines of a log.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
