package workflows

import "go.temporal.io/sdk/workflow"

// upgradeProbe, set only in builds with the upgradeprobe tag, runs at each
// supervision decision. It stands for a change to the host workflow's
// command sequence, so tests can prove an upgrade safe: the replay tests
// offline, and internal/e2e against running host workflows.
var upgradeProbe func(ctx workflow.Context)

// UpgradeProbeMemo is the memo field the upgradeprobe build sets on a host
// workflow once it made a decision there.
const UpgradeProbeMemo = "upgrade_probe"
