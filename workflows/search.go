package workflows

import (
	"go.temporal.io/sdk/temporal"

	"github.com/drover-sh/drover/proc"
)

// Custom search attributes on every Operate workflow, so the Temporal UI
// and `temporal workflow list --query` find tasks by what they did.
var (
	SAOp         = temporal.NewSearchAttributeKeyKeyword("DroverOp")
	SANamespace  = temporal.NewSearchAttributeKeyKeywordList("DroverNamespace")
	SAProcess    = temporal.NewSearchAttributeKeyKeywordList("DroverProcess")
	SAHostCount  = temporal.NewSearchAttributeKeyInt64("DroverHostCount")
	SAHosts      = temporal.NewSearchAttributeKeyKeywordList("DroverHosts")
	SAOutcome    = temporal.NewSearchAttributeKeyKeyword("DroverOutcome")
	SAFailedHost = temporal.NewSearchAttributeKeyInt64("DroverFailedCount")
	// Rollouts only: the batch in progress (1-based) and the rollout's state.
	SARolloutBatch = temporal.NewSearchAttributeKeyInt64("DroverRolloutBatch")
	SARolloutState = temporal.NewSearchAttributeKeyKeyword("DroverRolloutState")
)

// SearchAttributeTypes names every custom attribute with its type, as the
// dev server's --search-attribute and the operator API take them.
var SearchAttributeTypes = map[string]string{
	SAOp.GetName(): "Keyword", SANamespace.GetName(): "KeywordList", SAProcess.GetName(): "KeywordList",
	SAHostCount.GetName(): "Int", SAHosts.GetName(): "KeywordList", SAOutcome.GetName(): "Keyword",
	SAFailedHost.GetName(): "Int", SARolloutBatch.GetName(): "Int", SARolloutState.GetName(): "Keyword",
}

// Outcomes of a task.
const (
	OutcomeRunning = "running"
	OutcomeOK      = "ok"
	OutcomeFailed  = "failed" // at least one host ended non-zero
)

// outcomeOf summarises final results.
func outcomeOf(results []proc.HostResult) (string, int64) {
	return outcomeOfCount(int64(proc.CountFailed(results)))
}

// outcomeOfCount is a task's outcome by how many of its hosts failed.
func outcomeOfCount(failed int64) (string, int64) {
	if failed > 0 {
		return OutcomeFailed, failed
	}
	return OutcomeOK, 0
}
