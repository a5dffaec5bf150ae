package gseapi

import (
	"encoding/json"
	"fmt"

	"github.com/robfig/cron/v3"

	"github.com/drover-sh/drover/proc"
)

// SpecJSON is seed 004's spec, also the optional spec of an
// operate_proc_multi entry.
type SpecJSON struct {
	Identity      *IdentityJSON      `json:"identity"`
	Control       *ControlJSON       `json:"control"`
	Resource      *ResourceJSON      `json:"resource"`
	MonitorPolicy *MonitorPolicyJSON `json:"monitor_policy"`
	// AliveMonitorPolicy is GSE 2.0's name for monitor_policy; callers
	// send one or the other.
	AliveMonitorPolicy *MonitorPolicyJSON    `json:"alive_monitor_policy"`
	WarnReportPolicy   *WarnReportPolicyJSON `json:"warn_report_policy"`
	ConfigMap          []ConfigMapJSON       `json:"configmap"`
}

// IdentityJSON is spec.identity.
type IdentityJSON struct {
	// IndexKey appears in seed 004's example but not in its table; it is
	// GSE's value_key under another name, so it becomes Spec.ValueKey.
	IndexKey   string `json:"index_key"`
	ProcName   string `json:"proc_name"`
	SetupPath  string `json:"setup_path"`
	PidPath    string `json:"pid_path"`
	ConfigPath string `json:"config_path"`
	LogPath    string `json:"log_path"`
	User       string `json:"user"`
}

// ControlJSON is spec.control.
type ControlJSON struct {
	StartCmd   string `json:"start_cmd"`
	StopCmd    string `json:"stop_cmd"`
	RestartCmd string `json:"restart_cmd"`
	ReloadCmd  string `json:"reload_cmd"`
	KillCmd    string `json:"kill_cmd"`
	VersionCmd string `json:"version_cmd"`
	HealthCmd  string `json:"health_cmd"`
}

// ResourceJSON is spec.resource. fd, disk and net are documented as
// reserved; they are validated and kept (Reserved) but nothing enforces them.
type ResourceJSON struct {
	CPU  *float64 `json:"cpu"`
	Mem  *float64 `json:"mem"`
	FD   *int64   `json:"fd"`
	Disk *int64   `json:"disk"`
	Net  *int64   `json:"net"`
}

// MonitorPolicyJSON is spec.monitor_policy. Both spellings of the cron rule
// are read: the table says crontab_rule, the example (and so real callers)
// crotab_rule.
type MonitorPolicyJSON struct {
	AutoType       *int    `json:"auto_type"`
	StartCheckSecs *int    `json:"start_check_secs"`
	StopCheckSecs  *int    `json:"stop_check_secs"`
	StartRetries   *int    `json:"start_retries"`
	StartInterval  *int    `json:"start_interval"`
	CrontabRule    *string `json:"crontab_rule"`
	CrotabRule     *string `json:"crotab_rule"`
	// OpTimeout comes with alive_monitor_policy; null means the default.
	OpTimeout *int `json:"op_timeout"`
}

// WarnReportPolicyJSON is spec.warn_report_policy.
type WarnReportPolicyJSON struct {
	ReportID *int `json:"report_id"`
}

// ConfigMapJSON is one spec.configmap entry.
type ConfigMapJSON struct {
	Path string `json:"path"`
	MD5  string `json:"md5"`
	// Source is drover's addition: the content the file should have, by
	// its sha256 in files_dir, which config repair restores.
	Source *struct {
		SHA256 string `json:"sha256"`
	} `json:"source"`
}

// Reserved holds spec.resource's reserved limits, which proc.Spec has no
// place for yet. Zero means not given.
type Reserved struct {
	FD, Disk, Net int64
}

// cronParser is the standard five-field syntax plus descriptors
// (@hourly, @every 30s).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ProcInfoRequest is register_proc_info, update_proc_info and
// unregister_proc_info (seed 004; the other two share its shape).
type ProcInfoRequest struct {
	Caller
	Meta Meta `json:"meta"`
	HostList
	Spec *SpecJSON `json:"spec"`

	op       proc.OpType
	targets  []proc.Target
	spec     *proc.Spec
	reserved Reserved
}

// DecodeProcInfo decodes and validates a registry request; op is
// proc.OpSpecRegister, OpSpecUpdate or OpSpecUnregister. spec is required
// to register or update; unregister needs only meta and hosts, and ignores
// a spec if one is sent (callers reuse their register body).
func DecodeProcInfo(body []byte, op proc.OpType) (*ProcInfoRequest, error) {
	if !op.IsSpecOp() {
		return nil, fieldErr("api", "%v is not a registry operation", op)
	}
	// spec is read in a second step so that unregister ignores it whole,
	// however it is shaped.
	var w struct {
		Caller
		Meta Meta `json:"meta"`
		HostList
		Spec json.RawMessage `json:"spec"`
	}
	if err := decode(body, &w); err != nil {
		return nil, err
	}
	r := ProcInfoRequest{Caller: w.Caller, Meta: w.Meta, HostList: w.HostList, op: op}
	if op != proc.OpSpecUnregister && !isNull(w.Spec) {
		r.Spec = new(SpecJSON)
		if err := decodeAt("spec", w.Spec, r.Spec); err != nil {
			return nil, err
		}
	}
	targets, err := metaTargets(r.Meta, r.HostList)
	if err != nil {
		return nil, err
	}
	r.targets = targets
	if op == proc.OpSpecUnregister {
		return &r, nil
	}
	if r.Spec == nil {
		return nil, fieldErr("spec", "is required")
	}
	s, res, err := r.Spec.toSpec("spec", r.Meta)
	if err != nil {
		return nil, err
	}
	r.spec, r.reserved = &s, res
	return &r, nil
}

// Items translates the request: one item per host, named by meta. Each
// item has its own copy of the spec (nil for unregister).
func (r *ProcInfoRequest) Items() (proc.OpType, []proc.Item) {
	return r.op, metaItems(r.Meta, r.targets, r.spec)
}

// Reserved returns spec.resource's reserved limits.
func (r *ProcInfoRequest) Reserved() Reserved { return r.reserved }

// input maps a seed 004 spec (or the meta form's) under field f onto the
// one spec builder. Tolerant readings: every part but identity may be left
// out (no limits, default commands, a resident process with the default
// checks); monitor_policy and alive_monitor_policy are one part under two
// names (monitor_policy wins if both are sent); of crontab_rule and
// crotab_rule (the example's spelling) crontab_rule, the table's, wins.
func (sj *SpecJSON) input(f string, meta Meta) (specInput, error) {
	if sj.Identity == nil {
		return specInput{}, fieldErr(f+".identity", "is required: it names the process (identity.proc_name)")
	}
	id, idf := sj.Identity, f+".identity"
	ctl, cf := sj.Control, f+".control"
	if ctl == nil {
		ctl = &ControlJSON{}
	}
	rs, rf := sj.Resource, f+".resource"
	if rs == nil {
		rs = &ResourceJSON{}
	}
	mp, mf := sj.MonitorPolicy, f+".monitor_policy"
	if mp == nil && sj.AliveMonitorPolicy != nil {
		mp, mf = sj.AliveMonitorPolicy, f+".alive_monitor_policy"
	}
	if mp == nil {
		mp = &MonitorPolicyJSON{}
	}
	rule := text{mf + ".crontab_rule", ""}
	switch {
	case mp.CrontabRule != nil:
		rule.v = *mp.CrontabRule
	case mp.CrotabRule != nil:
		rule = text{mf + ".crotab_rule", *mp.CrotabRule}
	}
	reportID := 0
	if sj.WarnReportPolicy != nil && sj.WarnReportPolicy.ReportID != nil {
		reportID = *sj.WarnReportPolicy.ReportID
	}
	return specInput{
		procName: text{idf + ".proc_name", id.ProcName}, setupPath: text{idf + ".setup_path", id.SetupPath},
		pidPath: text{idf + ".pid_path", id.PidPath}, cfgPath: text{idf + ".config_path", id.ConfigPath},
		logPath: text{idf + ".log_path", id.LogPath}, account: text{idf + ".user", id.User},
		valueKey: text{idf + ".index_key", id.IndexKey},
		startCmd: text{cf + ".start_cmd", ctl.StartCmd}, stopCmd: text{cf + ".stop_cmd", ctl.StopCmd},
		restartCmd: text{cf + ".restart_cmd", ctl.RestartCmd}, reloadCmd: text{cf + ".reload_cmd", ctl.ReloadCmd},
		killCmd: text{cf + ".kill_cmd", ctl.KillCmd}, versionCmd: text{cf + ".version_cmd", ctl.VersionCmd},
		healthCmd: text{cf + ".health_cmd", ctl.HealthCmd},
		cpu:       percentage{rf + ".cpu", rs.CPU}, mem: percentage{rf + ".mem", rs.Mem},
		autoType: number{mf + ".auto_type", mp.AutoType}, startCheck: number{mf + ".start_check_secs", mp.StartCheckSecs},
		stopCheck: number{mf + ".stop_check_secs", mp.StopCheckSecs}, startRetries: number{mf + ".start_retries", mp.StartRetries},
		startInterval: number{mf + ".start_interval", mp.StartInterval}, opTimeout: number{mf + ".op_timeout", mp.OpTimeout},
		crontab: rule, configMap: sj.ConfigMap, configMapField: f + ".configmap",
		labels: meta.Labels, reportID: reportID, pathsRequired: true,
	}, nil
}

// toSpec validates a seed 004 spec under field f and builds the domain spec,
// with spec.resource's reserved limits.
func (sj *SpecJSON) toSpec(f string, meta Meta) (proc.Spec, Reserved, error) {
	var res Reserved
	in, err := sj.input(f, meta)
	if err != nil {
		return proc.Spec{}, res, err
	}
	s, err := in.build()
	if err != nil {
		return s, res, err
	}
	if rs := sj.Resource; rs != nil {
		// Reserved limits: negative reads as "not given".
		for _, c := range []struct {
			v   *int64
			dst *int64
		}{{rs.FD, &res.FD}, {rs.Disk, &res.Disk}, {rs.Net, &res.Net}} {
			if c.v != nil && *c.v > 0 {
				*c.dst = *c.v
			}
		}
	}
	return s, res, nil
}

// parseCron never lets a parser panic escape as a crashed request: cron
// v3.0.1 panics on a time zone prefix with no schedule after it ("TZ=UTC").
func parseCron(rule string) (sched cron.Schedule, err error) {
	defer func() {
		if p := recover(); p != nil {
			sched, err = nil, fmt.Errorf("malformed rule (%v)", p)
		}
	}()
	return cronParser.Parse(rule)
}
