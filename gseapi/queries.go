package gseapi

import (
	"encoding/json"

	"github.com/drover-sh/drover/proc"
)

// ResultQuery is get_proc_operate_result.
type ResultQuery struct {
	Caller
	TaskID string
}

type resultQueryJSON struct {
	Caller
	TaskID *string `json:"task_id"`
	// GSE 1.x callers poll operate_proc's answer under its own name,
	// bk_gse_taskid, with a bk_biz_id; both are accepted.
	GseTaskID *string `json:"bk_gse_taskid"`
	BizID     *int    `json:"bk_biz_id"`
}

// DecodeResultQuery decodes get_proc_operate_result: task_id is required and
// must start with "GSETASK:". bk_gse_taskid is read as the same field (if
// both are sent they must agree) and bk_biz_id is accepted and unused, since
// a task id alone names the task.
func DecodeResultQuery(body []byte) (*ResultQuery, error) {
	var r resultQueryJSON
	if err := decode(body, &r); err != nil {
		return nil, err
	}
	field, id := "task_id", ""
	switch {
	case r.TaskID != nil && r.GseTaskID != nil && *r.TaskID != *r.GseTaskID:
		return nil, fieldErr("bk_gse_taskid", "conflicts with task_id (%q vs %q)", *r.GseTaskID, *r.TaskID)
	case r.TaskID != nil:
		id = *r.TaskID
	case r.GseTaskID != nil:
		field, id = "bk_gse_taskid", *r.GseTaskID
	}
	if id == "" {
		return nil, fieldErr(field, "is required")
	}
	if err := ValidTaskID(id); err != nil {
		fe := err.(*FieldError)
		fe.Field = field
		return nil, fe
	}
	if hasControl(id) {
		return nil, fieldErr(field, "must not contain control characters")
	}
	if r.BizID != nil && *r.BizID < 0 {
		return nil, fieldErr("bk_biz_id", "must be >= 0, got %d", *r.BizID)
	}
	return &ResultQuery{Caller: r.Caller, TaskID: id}, nil
}

// StatusQuery is get_proc_status: one process (meta) on some hosts.
type StatusQuery struct {
	Caller
	Namespace, Name string
	// Labels are meta.labels as sent, given back in each answer.
	Labels  map[string]json.RawMessage
	Targets []proc.Target
}

type statusQueryJSON struct {
	Caller
	Meta Meta `json:"meta"`
	HostList
}

// DecodeStatusQuery decodes get_proc_status: meta.namespace and meta.name
// are required (the status of a whole namespace is sync_proc_status), hosts
// as operate_process. meta.labels is accepted and unused.
func DecodeStatusQuery(body []byte) (*StatusQuery, error) {
	var r statusQueryJSON
	if err := decode(body, &r); err != nil {
		return nil, err
	}
	targets, err := metaTargets(r.Meta, r.HostList)
	if err != nil {
		return nil, err
	}
	return &StatusQuery{Caller: r.Caller, Namespace: r.Meta.Namespace, Name: r.Meta.Name, Labels: r.Meta.Labels, Targets: targets}, nil
}

// SyncQuery is sync_proc_status: a page of the statuses of a namespace.
type SyncQuery struct {
	Caller
	Namespace string
	// Name, when not empty, narrows the page to one process of the
	// namespace (meta.name is optional here).
	Name         string
	Start, Limit int
}

// Page bounds of sync_proc_status.
const (
	DefaultSyncLimit = 100
	MaxSyncLimit     = 1000
)

type syncQueryJSON struct {
	Caller
	Meta struct {
		Namespace string                     `json:"namespace"`
		Name      string                     `json:"name"`
		Labels    map[string]json.RawMessage `json:"labels"`
	} `json:"meta"`
	Page *struct {
		Start *int `json:"start"`
		Limit *int `json:"limit"`
	} `json:"page"`
}

// DecodeSyncQuery decodes sync_proc_status: meta.namespace is required,
// meta.name optional; page.start >= 0 (default 0), page.limit in
// [1, 1000] (default 100: a caller that forgets the page gets a page, not
// the whole namespace). A limit above 1000 is refused, not clamped, so a
// caller never mistakes a short page for the end.
func DecodeSyncQuery(body []byte) (*SyncQuery, error) {
	var r syncQueryJSON
	if err := decode(body, &r); err != nil {
		return nil, err
	}
	if err := validateName("meta.namespace", r.Meta.Namespace); err != nil {
		return nil, err
	}
	if r.Meta.Name != "" {
		if err := validateProcessName("meta.name", r.Meta.Name); err != nil {
			return nil, err
		}
	}
	q := &SyncQuery{Caller: r.Caller, Namespace: r.Meta.Namespace, Name: r.Meta.Name, Limit: DefaultSyncLimit}
	if r.Page != nil {
		if r.Page.Start != nil {
			if *r.Page.Start < 0 {
				return nil, fieldErr("page.start", "must be >= 0, got %d", *r.Page.Start)
			}
			q.Start = *r.Page.Start
		}
		if r.Page.Limit != nil {
			if *r.Page.Limit < 1 || *r.Page.Limit > MaxSyncLimit {
				return nil, fieldErr("page.limit", "must be within [1, %d], got %d", MaxSyncLimit, *r.Page.Limit)
			}
			q.Limit = *r.Page.Limit
		}
	}
	return q, nil
}
