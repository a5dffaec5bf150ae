// Package workflows fans each op out over hosts and reports per-host results.
// Workflow code is deterministic; every decision it takes comes from policies.
package workflows

import (
	"github.com/drover-sh/drover/proc"
)

const (
	// TaskQueue is the default queue workers poll.
	TaskQueue = "drover"
	// OperateWorkflowName is the registered name of the op fan-out.
	OperateWorkflowName = "Operate"
	// ProgressQuery returns every host's result so far, pending ones as 115.
	ProgressQuery = "progress"
)

// OperateInput is one request: an op over items. It never carries secrets.
type OperateInput struct {
	TaskID string      `json:"task_id"`
	Op     proc.OpType `json:"op_type"`
	Items  []proc.Item `json:"items"`
}

// KeyedResult is one host's result under its result key.
type KeyedResult struct {
	Key string `json:"key"`
	proc.HostResult
}

// OperateResult is the workflow's result and its progress query answer.
type OperateResult struct {
	TaskID  string        `json:"task_id"`
	Done    int           `json:"done"`
	Total   int           `json:"total"`
	Results []KeyedResult `json:"results"`
}
