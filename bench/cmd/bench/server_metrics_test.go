package main

import "testing"

// Series as the dev server names them.
func TestUsedBetweenCountsDroversWritesAndCompletions(t *testing.T) {
	const (
		update   = `persistence_requests{namespace="default",operation="UpdateWorkflowExecution",service_name="history"}`
		create   = `persistence_requests{namespace="default",operation="CreateWorkflowExecution",service_name="history"}`
		tasks    = `persistence_requests{namespace="default",operation="CreateTasks",service_name="matching"}`
		queueAck = `persistence_requests{namespace="default",operation="CompleteTasksLessThan",service_name="matching"}`
		shardAck = `persistence_requests{namespace="system",operation="RangeCompleteTransferTasks",service_name="history"}`
		read     = `persistence_requests{namespace="default",operation="GetWorkflowExecution",service_name="history"}`
		shard    = `persistence_requests{namespace="system",operation="UpdateShard",service_name="history"}`
		system   = `persistence_requests{namespace="temporal_system",operation="UpdateWorkflowExecution",service_name="history"}`
		vis      = `visibility_persistence_requests{operation="UpsertWorkflowExecution",service_name="history",visibility_plugin_name="sqlite"}`
		front    = `service_requests{namespace="default",operation="StartWorkflowExecution",service_name="frontend"}`
		passedOn = `service_requests{namespace="default",operation="StartWorkflowExecution",service_name="history"}`
		own      = `service_requests{namespace="temporal_system",operation="PollWorkflowTaskQueue",service_name="frontend"}`
	)
	a := serverSnapshot{update: 10, create: 1, tasks: 2, queueAck: 1, shardAck: 5, read: 3, shard: 1, system: 4, vis: 2, front: 1, passedOn: 1, own: 7}
	b := serverSnapshot{update: 14, create: 2, tasks: 3, queueAck: 2, shardAck: 6, read: 9, shard: 3, system: 9, vis: 4, front: 2, passedOn: 2, own: 8}
	u := usedBetween(a, b, "default")
	want := map[string]float64{"UpdateWorkflowExecution": 4, "CreateWorkflowExecution": 1, "CreateTasks": 1,
		"CompleteTasksLessThan": 1, "RangeCompleteTransferTasks": 1}
	if len(u.Writes) != len(want) {
		t.Fatalf("writes %v, want %v", u.Writes, want)
	}
	for k, v := range want {
		if u.Writes[k] != v {
			t.Errorf("writes[%s] = %v, want %v (all: %v)", k, u.Writes[k], v, u.Writes)
		}
	}
	if u.Visibility["UpsertWorkflowExecution"] != 2 || len(u.Visibility) != 1 {
		t.Errorf("visibility %v, want UpsertWorkflowExecution 2", u.Visibility)
	}
	if u.Requests["StartWorkflowExecution"] != 1 || len(u.Requests) != 1 || u.Own["PollWorkflowTaskQueue"] != 1 {
		t.Errorf("requests %v own %v, want the frontend's StartWorkflowExecution 1 and the server's own poll 1", u.Requests, u.Own)
	}
	if u := usedBetween(a, nil, "default"); total(u.Writes) != 0 {
		t.Errorf("no second reading counted %v", u.Writes)
	}
}
