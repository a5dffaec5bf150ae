package main

import (
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	updatepb "go.temporal.io/api/update/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestHostOpPhasesFollowsTheTasksUpdate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) *timestamppb.Timestamp {
		return timestamppb.New(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	var id int64
	ev := func(ms int, typ enumspb.EventType, set func(*historypb.HistoryEvent)) *historypb.HistoryEvent {
		id++
		e := &historypb.HistoryEvent{EventId: id, EventTime: at(ms), EventType: typ}
		if set != nil {
			set(e)
		}
		return e
	}
	accepted := func(updateID string) func(*historypb.HistoryEvent) {
		return func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_WorkflowExecutionUpdateAcceptedEventAttributes{WorkflowExecutionUpdateAcceptedEventAttributes: &historypb.WorkflowExecutionUpdateAcceptedEventAttributes{
				AcceptedRequest: &updatepb.Request{Meta: &updatepb.Meta{UpdateId: updateID}}}}
		}
	}
	completed := func(updateID string) func(*historypb.HistoryEvent) {
		return func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_WorkflowExecutionUpdateCompletedEventAttributes{WorkflowExecutionUpdateCompletedEventAttributes: &historypb.WorkflowExecutionUpdateCompletedEventAttributes{
				Meta: &updatepb.Meta{UpdateId: updateID}}}
		}
	}
	marker := func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: "LocalActivity"}}
	}
	hostOp := func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			ActivityType: &commonpb.ActivityType{Name: "HostOp"}}}
	}
	done := func(scheduled int64) func(*historypb.HistoryEvent) {
		return func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: scheduled}}
		}
	}
	evs := []*historypb.HistoryEvent{
		// An earlier task's op, which is not this one.
		ev(-900, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil),
		ev(-500, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil),
		ev(-500, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, accepted("T0#3")),
		ev(-500, enumspb.EVENT_TYPE_MARKER_RECORDED, marker),
		ev(-500, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED, completed("T0#3")),
		// This task's: taken 300 ms after its start, the local op runs
		// 6 s and goes on as an activity that ends 2 s later.
		ev(250, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil),
		ev(300, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil),
		ev(6300, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil),
		ev(6300, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, accepted("T1#7")),
		ev(6300, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, hostOp),
	}
	scheduled := id
	evs = append(evs,
		ev(8300, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, done(scheduled)),
		ev(8300, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil),
		ev(8350, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil),
		ev(8400, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil),
		ev(8400, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED, completed("T1#7")),
	)
	p, err := hostOpPhases(evs, "T1#", t0)
	if err != nil {
		t.Fatal(err)
	}
	if p.taken != 0.3 || p.ran != 8 || p.answered != 0.1 || !p.handedOver || p.tasks != 2 {
		t.Errorf("phases %+v, want taken 0.3 s, ran 8 s (handed over), answered 0.1 s, 2 workflow tasks", p)
	}
	if _, err := hostOpPhases(evs, "T2#", t0); err == nil {
		t.Error("a task with no update in the history was found")
	}
}
