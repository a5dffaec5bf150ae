//go:build upgradeprobe

package workflows

import "go.temporal.io/sdk/workflow"

// upgradeProbeChange guards the probe's extra command, as every change to
// a running workflow's command sequence must be guarded.
const upgradeProbeChange = "upgrade-probe"

// probeUnguarded drops the guard, for the test that shows the recorded
// histories catch an unguarded change.
var probeUnguarded bool

func init() { upgradeProbe = probeDecision }

// probeDecision adds one command, a memo upsert, to the first supervision
// decision of a run under this build.
func probeDecision(ctx workflow.Context) {
	if !probeUnguarded && workflow.GetVersion(ctx, upgradeProbeChange, workflow.DefaultVersion, 1) < 1 {
		return
	}
	if _, done := workflow.GetInfo(ctx).Memo.GetFields()[UpgradeProbeMemo]; done {
		return
	}
	_ = workflow.UpsertMemo(ctx, map[string]any{UpgradeProbeMemo: true})
}
