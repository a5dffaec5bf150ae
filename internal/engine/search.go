package engine

import (
	"sort"

	"go.temporal.io/sdk/temporal"

	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/workflows"
)

// maxIndexedHosts bounds DroverHosts: search attributes are small by
// design; larger tasks are found by op, namespace and process instead.
const maxIndexedHosts = 100

// taskSearchAttributes describes a task at its start.
func taskSearchAttributes(in workflows.OperateInput) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(taskSearchUpdates(in)...)
}

// taskSearchUpdates are a task's attributes at its start, as updates.
func taskSearchUpdates(in workflows.OperateInput) []temporal.SearchAttributeUpdate {
	ns, names, hosts := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, it := range in.Items {
		// A host check's items name no process.
		if it.Process != (proc.ProcessID{}) {
			ns[it.Process.Namespace] = true
			names[it.Process.Namespace+"/"+it.Process.Name] = true
		}
		hosts[it.Target.HostID().String()] = true
	}
	upd := []temporal.SearchAttributeUpdate{
		workflows.SAOp.ValueSet(in.Op.String()), workflows.SANamespace.ValueSet(sorted(ns)), workflows.SAProcess.ValueSet(sorted(names)),
		workflows.SAHostCount.ValueSet(int64(len(hosts))), workflows.SAOutcome.ValueSet(workflows.OutcomeRunning),
	}
	if len(hosts) <= maxIndexedHosts {
		upd = append(upd, workflows.SAHosts.ValueSet(sorted(hosts)))
	}
	return upd
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
