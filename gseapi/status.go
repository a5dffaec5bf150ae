package gseapi

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"github.com/drover-sh/drover/proc"
)

// Registry lists registered processes; the workflow engine implements it
// for sync_proc_status.
type Registry interface {
	// Registered returns every (host, process) registered under namespace
	// (and name, when not empty).
	Registered(ctx context.Context, namespace, name string) ([]proc.Item, error)
}

// Process states of get_proc_status's flag (expected) and status (actual).
const (
	StateUnregistered = 0
	StateRunning      = 1
	StateStopped      = 2
)

// ProcStatus is one entry of get_proc_status / sync_proc_status.
type ProcStatus struct {
	Meta          Meta     `json:"meta"`
	Host          ProcHost `json:"host"`
	Flag          int      `json:"flag"`   // expected: 0 unregistered, 1 running, 2 stopped
	Status        int      `json:"status"` // actual, same codes
	IsAuto        bool     `json:"isauto"`
	Message       string   `json:"message"`
	Pid           int      `json:"pid"`
	Version       string   `json:"version"`
	RegisterTime  int64    `json:"register_time"`
	LastStartTime int64    `json:"last_start_time"`
	ReportTime    int64    `json:"report_time"`
	CPUUsage      float64  `json:"cpu_usage"`
	MemUsage      float64  `json:"mem_usage"`
	FD            int      `json:"fd"`
	Disk          int      `json:"disk"`
	Net           int      `json:"net"`
	ConfigDrift   []string `json:"config_drift,omitempty"`
	// ErrorCode is the host's code for this process (drover's addition),
	// so a caller can tell "stopped" from "host unreachable".
	ErrorCode int `json:"error_code"`
	// AgentID is get_proc_status_v2's: the agent id the caller named the
	// host by, else "<bk_cloud_id>:<ip>". get_proc_status leaves it out.
	AgentID string `json:"bk_agent_id,omitempty"`
}

// ProcHost is the host of a ProcStatus.
type ProcHost struct {
	IP         string `json:"ip"`
	CloudID    int    `json:"bk_cloud_id"`
	SupplierID int    `json:"bk_supplier_id"`
	AgentID    string `json:"bk_agent_id,omitempty"` // as ProcStatus.AgentID
}

// StatusData is get_proc_status's data.
type StatusData struct {
	ProcInfos []ProcStatus `json:"proc_infos"`
}

// SyncData is sync_proc_status's data.
type SyncData struct {
	Count     int          `json:"count"`
	ProcInfos []ProcStatus `json:"proc_infos"`
}

// procInfo builds a ProcStatus from a status result.
func procInfo(it proc.Item, r proc.HostResult) ProcStatus {
	pi := ProcStatus{
		// labels is an object in the documented shape, never null.
		Meta:      Meta{Namespace: it.Process.Namespace, Name: it.Process.Name, Labels: map[string]json.RawMessage{}},
		Host:      ProcHost{IP: it.Target.IP, CloudID: it.Target.CloudID, SupplierID: it.Target.SupplierID},
		Message:   r.Message,
		Pid:       -1,
		ErrorCode: int(r.Code),
	}
	var c proc.StatusContent
	if r.Code == proc.CodeNotRegistered || json.Unmarshal([]byte(r.Content), &c) != nil || len(c.Process) == 0 || len(c.Process[0].Instance) == 0 {
		return pi // unregistered, or the host could not be read
	}
	in := c.Process[0].Instance[0]
	pi.IsAuto, pi.Pid, pi.Version = in.IsAuto, in.Pid, in.Version
	pi.RegisterTime, pi.LastStartTime, pi.ReportTime = in.RegisterTime, in.LastStartTime, in.ReportTime
	pi.CPUUsage, pi.MemUsage = in.CPUUsage, in.PhyMemUsage
	pi.ConfigDrift = in.ConfigDrift
	pi.Flag = StateStopped
	if in.Expected { // managed implies expected (proc.BuildStatus)
		pi.Flag = StateRunning
	}
	pi.Status = StateStopped
	if in.Pid > 0 {
		pi.Status = StateRunning
	}
	return pi
}

// statusOf runs a status task over items and renders their ProcInfos; v2
// adds each host's agent id. labels, when not nil, are the request's
// meta.labels, given back as sent.
func statusOf(ctx context.Context, e Engine, items []proc.Item, labels map[string]json.RawMessage, v2 bool) ([]ProcStatus, error) {
	if len(items) == 0 {
		return []ProcStatus{}, nil
	}
	resolveAgents(e, items)
	id, err := e.Start(ctx, &Task{API: APIGetProcStatus, Op: proc.OpStatus, Items: items})
	if err != nil {
		return nil, err
	}
	res, err := e.Results(ctx, id, true)
	if err != nil {
		return nil, err
	}
	got := proc.ByKey(res)
	out := make([]ProcStatus, len(items))
	for i, it := range items {
		r, ok := got[it.Key()]
		if !ok {
			r = proc.Pending()
		}
		out[i] = procInfo(it, r)
		if labels != nil {
			out[i].Meta.Labels = labels
		}
		if v2 {
			out[i].AgentID = agentOf(e, it.Target)
			out[i].Host.AgentID = out[i].AgentID
		}
	}
	return out, nil
}

// statusQuery decodes get_proc_status, or with v2 its GSE 2.0 twin.
func statusQuery(v2 bool) func([]byte) (query, error) {
	return func(body []byte) (query, error) {
		q, err := DecodeStatusQuery(body)
		if err != nil {
			return query{}, err
		}
		return query{uses: metaNamespace(q.Namespace), answer: func(ctx context.Context, e Engine, _ *Grant) (Response, Outcome) {
			return getProcStatus(ctx, e, q, v2)
		}}, nil
	}
}

func getProcStatus(ctx context.Context, e Engine, q *StatusQuery, v2 bool) (Response, Outcome) {
	items := make([]proc.Item, len(q.Targets))
	for i, t := range q.Targets {
		items[i] = proc.Item{Target: t, Process: proc.ProcessID{Namespace: q.Namespace, Name: q.Name}}
	}
	infos, err := statusOf(ctx, e, items, q.Labels, v2)
	if err != nil {
		return Failure(CodeUnavailable, err), OutcomeUnavailable
	}
	return OK(StatusData{ProcInfos: infos}), OutcomeOK
}

func syncQuery(body []byte) (query, error) {
	q, err := DecodeSyncQuery(body)
	if err != nil {
		return query{}, err
	}
	return query{uses: metaNamespace(q.Namespace), answer: func(ctx context.Context, e Engine, _ *Grant) (Response, Outcome) {
		return syncProcStatus(ctx, e, q)
	}}, nil
}

func syncProcStatus(ctx context.Context, e Engine, q *SyncQuery) (Response, Outcome) {
	reg, ok := e.(Registry)
	if !ok {
		return Failure(CodeUnavailable, errors.New("this engine cannot list the registry")), OutcomeUnavailable
	}
	all, err := reg.Registered(ctx, q.Namespace, q.Name)
	if err != nil {
		return Failure(CodeUnavailable, err), OutcomeUnavailable
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Key() < all[j].Key() })
	page := []proc.Item{}
	if q.Start < len(all) {
		page = all[q.Start:min(q.Start+q.Limit, len(all))]
	}
	infos, err := statusOf(ctx, e, page, nil, false)
	if err != nil {
		return Failure(CodeUnavailable, err), OutcomeUnavailable
	}
	return OK(SyncData{Count: len(all), ProcInfos: infos}), OutcomeOK
}
