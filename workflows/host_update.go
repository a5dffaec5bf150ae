package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/drover-sh/drover/proc"
)

// A task hands each item to its host by the OpUpdate update and reads the
// op's answer from the update's outcome: no reply signal reaches the task,
// and the host's answer costs the engine nothing beyond the host's own
// workflow task. The host runs updates' requests through the same queue as
// signalled ones, one at a time with supervision.

// updateBuffer holds updates' requests until the host's loop takes them;
// the server lets far fewer updates be in flight on one workflow.
const updateBuffer = 1000

// maxAnswers bounds the answers a host keeps for requests sent again: the
// server drops an update id it has seen only within one run, and a host
// continues as new. A request is sent again within a minute of the first.
const maxAnswers = 256

// Answer is a request's answer, kept for a copy of the request that comes
// again.
type Answer struct {
	ID     string          `json:"id"`
	Result proc.HostResult `json:"result"`
}

// onOp is the OpUpdate handler: the request joins the host's queue, and the
// update completes with its answer.
func (h *host) onOp(ctx workflow.Context, req HostRequest) (proc.HostResult, error) {
	req.ReplyTo = ""
	if r, ok := h.answerOf(req.RequestID); ok {
		return r, nil
	}
	if h.seen(req.RequestID) && !h.awaited(req.RequestID) {
		// Taken by an earlier run, whose answer is no longer kept.
		return proc.Fail(proc.CodeInternal, "request %s was run by this host before; its answer is no longer kept: read the task's result", req.RequestID), nil
	}
	if !h.awaited(req.RequestID) {
		h.waiting = append(h.waiting, req.RequestID)
		if !h.updates.SendAsync(req) {
			h.Queue = append(h.Queue, req)
		}
	}
	var res proc.HostResult
	if err := workflow.Await(ctx, func() bool {
		r, ok := h.answerOf(req.RequestID)
		res = r
		return ok
	}); err != nil {
		return proc.HostResult{}, err
	}
	return res, nil
}

// awaited reports whether an update waits on request id's answer.
func (h *host) awaited(id string) bool {
	for _, w := range h.waiting {
		if w == id {
			return true
		}
	}
	return false
}

// answerOf is the kept answer to request id.
func (h *host) answerOf(id string) (proc.HostResult, bool) {
	for i := len(h.Answers) - 1; i >= 0; i-- {
		if h.Answers[i].ID == id {
			return h.Answers[i].Result, true
		}
	}
	return proc.HostResult{}, false
}

// answer keeps the answer of a request an update waits on, which completes
// that update.
func (h *host) answer(req HostRequest, res proc.HostResult) bool {
	if !h.awaited(req.RequestID) {
		return false
	}
	for i, w := range h.waiting {
		if w == req.RequestID {
			h.waiting = append(h.waiting[:i], h.waiting[i+1:]...)
			break
		}
	}
	h.Answers = append(h.Answers, Answer{ID: req.RequestID, Result: res})
	if len(h.Answers) > maxAnswers {
		h.Answers = h.Answers[len(h.Answers)-maxAnswers:]
	}
	return true
}
