package gseapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/drover-sh/drover/proc"
)

// SpecJSON is seed 004's spec, also the optional spec of an
// operate_proc_multi entry.
type SpecJSON struct {
	Identity         *IdentityJSON         `json:"identity"`
	Control          *ControlJSON          `json:"control"`
	Resource         *ResourceJSON         `json:"resource"`
	MonitorPolicy    *MonitorPolicyJSON    `json:"monitor_policy"`
	WarnReportPolicy *WarnReportPolicyJSON `json:"warn_report_policy"`
	ConfigMap        []ConfigMapJSON       `json:"configmap"`
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
}

// WarnReportPolicyJSON is spec.warn_report_policy.
type WarnReportPolicyJSON struct {
	ReportID *int `json:"report_id"`
}

// ConfigMapJSON is one spec.configmap entry.
type ConfigMapJSON struct {
	Path string `json:"path"`
	MD5  string `json:"md5"`
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
	Meta  Meta      `json:"meta"`
	Hosts []HostRef `json:"hosts"`
	Spec  *SpecJSON `json:"spec"`

	op       proc.OpType
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
		Meta  Meta            `json:"meta"`
		Hosts []HostRef       `json:"hosts"`
		Spec  json.RawMessage `json:"spec"`
	}
	if err := decode(body, &w); err != nil {
		return nil, err
	}
	r := ProcInfoRequest{Caller: w.Caller, Meta: w.Meta, Hosts: w.Hosts, op: op}
	if op != proc.OpSpecUnregister && !isNull(w.Spec) {
		r.Spec = new(SpecJSON)
		if err := decodeAt("spec", w.Spec, r.Spec); err != nil {
			return nil, err
		}
	}
	if err := validateMeta("meta", r.Meta); err != nil {
		return nil, err
	}
	if err := validateHosts("hosts", r.Hosts); err != nil {
		return nil, err
	}
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
	pid := proc.ProcessID{Namespace: r.Meta.Namespace, Name: r.Meta.Name}
	items := make([]proc.Item, len(r.Hosts))
	for i, h := range r.Hosts {
		items[i] = proc.Item{Target: h.Target(), Process: pid}
		if r.spec != nil {
			s := *r.spec
			items[i].Spec = &s
		}
	}
	return r.op, items
}

// Reserved returns spec.resource's reserved limits.
func (r *ProcInfoRequest) Reserved() Reserved { return r.reserved }

// toSpec validates a seed 004 spec under field f and builds the domain spec.
func (sj *SpecJSON) toSpec(f string, meta Meta) (proc.Spec, Reserved, error) {
	var s proc.Spec
	var res Reserved
	for _, part := range []struct {
		name    string
		present bool
	}{
		{"identity", sj.Identity != nil}, {"control", sj.Control != nil},
		{"resource", sj.Resource != nil}, {"monitor_policy", sj.MonitorPolicy != nil},
	} {
		if !part.present {
			return s, res, fieldErr(f+"."+part.name, "is required")
		}
	}

	id, idf := sj.Identity, f+".identity"
	if err := validateProcName(idf+".proc_name", id.ProcName); err != nil {
		return s, res, err
	}
	for _, c := range []struct {
		field, v string
		required bool
	}{
		{"setup_path", id.SetupPath, true}, {"pid_path", id.PidPath, true},
		{"config_path", id.ConfigPath, false}, {"log_path", id.LogPath, false},
	} {
		if err := validatePath(idf+"."+c.field, c.v, c.required); err != nil {
			return s, res, err
		}
	}
	if id.User == "" {
		return s, res, fieldErr(idf+".user", "is required")
	}
	if err := validateAccount(idf+".user", id.User); err != nil {
		return s, res, err
	}
	if err := validateText(idf+".index_key", id.IndexKey); err != nil {
		return s, res, err
	}

	ctl, cf := sj.Control, f+".control"
	for _, c := range []struct{ field, v string }{
		{"start_cmd", ctl.StartCmd}, {"stop_cmd", ctl.StopCmd}, {"restart_cmd", ctl.RestartCmd},
		{"reload_cmd", ctl.ReloadCmd}, {"kill_cmd", ctl.KillCmd},
		{"version_cmd", ctl.VersionCmd}, {"health_cmd", ctl.HealthCmd},
	} {
		if err := validateCommand(cf+"."+c.field, c.v); err != nil {
			return s, res, err
		}
	}

	rs, rf := sj.Resource, f+".resource"
	if rs.CPU == nil {
		return s, res, fieldErr(rf+".cpu", "is required")
	}
	cpu, err := percent(rf+".cpu", rs.CPU)
	if err != nil {
		return s, res, err
	}
	if rs.Mem == nil {
		return s, res, fieldErr(rf+".mem", "is required")
	}
	mem, err := percent(rf+".mem", rs.Mem)
	if err != nil {
		return s, res, err
	}
	for _, c := range []struct {
		field string
		v     *int64
		dst   *int64
	}{{"fd", rs.FD, &res.FD}, {"disk", rs.Disk, &res.Disk}, {"net", rs.Net, &res.Net}} {
		if c.v == nil {
			continue
		}
		if *c.v < 0 {
			return s, res, fieldErr(rf+"."+c.field, "must be >= 0, got %d", *c.v)
		}
		*c.dst = *c.v
	}

	mp, mf := sj.MonitorPolicy, f+".monitor_policy"
	if mp.AutoType == nil {
		return s, res, fieldErr(mf+".auto_type", "is required")
	}
	auto := proc.AutoType(*mp.AutoType)
	switch auto {
	case proc.AutoPeriodic, proc.AutoResident, proc.AutoOneShot:
	default:
		return s, res, fieldErr(mf+".auto_type", "must be 0 (periodic), 1 (resident) or 2 (one-shot), got %d", *mp.AutoType)
	}
	startCheck, err := seconds(mf+".start_check_secs", mp.StartCheckSecs, MaxCheckSecs)
	if err != nil {
		return s, res, err
	}
	stopCheck, err := seconds(mf+".stop_check_secs", mp.StopCheckSecs, MaxCheckSecs)
	if err != nil {
		return s, res, err
	}
	retries, err := nonNegative(mf+".start_retries", mp.StartRetries)
	if err != nil {
		return s, res, err
	}
	interval, err := seconds(mf+".start_interval", mp.StartInterval, MaxPeriodSecs)
	if err != nil {
		return s, res, err
	}
	rule, err := crontabRule(mf, mp, auto)
	if err != nil {
		return s, res, err
	}

	reportID := 0
	if sj.WarnReportPolicy != nil && sj.WarnReportPolicy.ReportID != nil {
		reportID = *sj.WarnReportPolicy.ReportID
	}

	cm, err := configMap(f+".configmap", sj.ConfigMap)
	if err != nil {
		return s, res, err
	}

	s = proc.Spec{
		ProcName:      id.ProcName,
		SetupPath:     id.SetupPath,
		PidPath:       pidFile(id.PidPath, id.ProcName),
		ConfigPath:    id.ConfigPath,
		LogPath:       id.LogPath,
		Account:       id.User,
		Labels:        meta.Labels,
		StartCmd:      ctl.StartCmd,
		StopCmd:       ctl.StopCmd,
		RestartCmd:    ctl.RestartCmd,
		ReloadCmd:     ctl.ReloadCmd,
		KillCmd:       ctl.KillCmd,
		VersionCmd:    ctl.VersionCmd,
		HealthCmd:     ctl.HealthCmd,
		ValueKey:      id.IndexKey,
		CPULimit:      cpu,
		MemLimit:      mem,
		AutoType:      auto,
		CrontabRule:   rule,
		StartCheck:    startCheck,
		StopCheck:     stopCheck,
		StartRetries:  retries,
		StartInterval: interval,
		ConfigMap:     cm,
		ReportID:      reportID,
	}
	return s, res, nil
}

// crontabRule reads either spelling. It is required, and must parse, when
// auto_type is 0: this API has no cycle_time, so a periodic process without
// a rule could never run. For other auto_types the seed says the rule has
// no effect, so it is dropped rather than stored unchecked.
func crontabRule(mf string, mp *MonitorPolicyJSON, auto proc.AutoType) (string, error) {
	field, rule := mf+".crontab_rule", ""
	switch {
	case mp.CrontabRule != nil && mp.CrotabRule != nil && *mp.CrontabRule != *mp.CrotabRule:
		return "", fieldErr(mf+".crotab_rule", "conflicts with crontab_rule (%q vs %q); send one spelling", *mp.CrotabRule, *mp.CrontabRule)
	case mp.CrontabRule != nil:
		rule = *mp.CrontabRule
	case mp.CrotabRule != nil:
		field, rule = mf+".crotab_rule", *mp.CrotabRule
	}
	if auto != proc.AutoPeriodic {
		return "", nil
	}
	rule = strings.TrimSpace(rule)
	if rule == "" {
		return "", fieldErr(field, "is required when auto_type is 0 (periodic)")
	}
	if err := validateText(field, rule); err != nil {
		return "", err
	}
	if d, ok := strings.CutPrefix(rule, "@every "); ok {
		// The parser silently turns a zero or negative interval into one
		// second; a caller who wrote that meant something else.
		if iv, err := time.ParseDuration(strings.TrimSpace(d)); err == nil && iv < time.Second {
			return "", fieldErr(field, "%q: the interval must be at least 1s", rule)
		}
	}
	sched, err := parseCron(rule)
	if err != nil {
		return "", fieldErr(field, "%q is not a cron rule (minute hour day-of-month month day-of-week, or a descriptor such as @every 30s): %v", rule, err)
	}
	if sched.Next(time.Now()).IsZero() {
		return "", fieldErr(field, "%q never fires", rule)
	}
	return rule, nil
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

// configMap validates spec.configmap. Entries with neither path nor md5 are
// dropped (seed 004's example sends one as a placeholder); any other entry
// needs both, since drift is judged by comparing the file's md5. The md5 is
// stored lower-case.
func configMap(f string, in []ConfigMapJSON) ([]proc.ConfigFile, error) {
	var out []proc.ConfigFile
	seen := map[string]int{}
	for i, c := range in {
		ef := indexed(f, i)
		if c.Path == "" && c.MD5 == "" {
			continue
		}
		if err := validatePath(ef+".path", c.Path, true); err != nil {
			return nil, err
		}
		if j, dup := seen[c.Path]; dup {
			return nil, fieldErr(ef+".path", "duplicates %s.path (%q)", indexed(f, j), c.Path)
		}
		seen[c.Path] = i
		if !isMD5(c.MD5) {
			return nil, fieldErr(ef+".md5", "must be 32 hexadecimal characters, got %q", c.MD5)
		}
		out = append(out, proc.ConfigFile{Path: c.Path, MD5: strings.ToLower(c.MD5)})
	}
	return out, nil
}

func isMD5(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
