package gseapi

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/drover-sh/drover/proc"
)

// IPRef is one entry of ip_list (seeds 001-003).
type IPRef struct {
	CloudID *int   `json:"bk_cloud_id"`
	IP      string `json:"ip"`
	// SupplierID is not documented for ip_list; it is taken when a caller
	// sends it, so the result keys it builds match, and is 0 otherwise.
	SupplierID *int `json:"bk_supplier_id"`
}

// ProcInfo is one entry of process_infos: the v1 fields (seed 001), the v2
// additions (seed 002) and manage_proc's proc_owner (seed 003). One shape
// serves all three because callers mix fields across versions.
type ProcInfo struct {
	SetupPath   string   `json:"setup_path"`
	ProcName    string   `json:"proc_name"`
	PidPath     string   `json:"pid_path"`
	Account     string   `json:"account"`
	CmdShellExt string   `json:"cmd_shell_ext"`
	CPULmt      *float64 `json:"cpu_lmt"`
	MemLmt      *float64 `json:"mem_lmt"`
	IPList      []IPRef  `json:"ip_list"`

	CfgPath             string          `json:"cfg_path"`
	LogPath             string          `json:"log_path"`
	Contact             string          `json:"contact"`
	StartCmd            string          `json:"start_cmd"`
	StopCmd             string          `json:"stop_cmd"`
	RestartCmd          string          `json:"restart_cmd"`
	ReloadCmd           string          `json:"reload_cmd"`
	KillCmd             string          `json:"kill_cmd"`
	FuncID              json.RawMessage `json:"func_id"`     // string, or an integer
	InstanceID          json.RawMessage `json:"instance_id"` // string, or an integer
	ValueKey            string          `json:"value_key"`
	Type                *int            `json:"type"`
	CycleTime           *int            `json:"cycle_time"`
	InstanceNum         *int            `json:"instance_num"`
	StartCheckBeginTime *int            `json:"start_check_begin_time"`
	StartCheckEndTime   *int            `json:"start_check_end_time"`
	OpTimeout           *int            `json:"op_timeout"`

	ProcOwner string `json:"proc_owner"` // manage_proc: the contact
}

// OperateProcRequest is operate_proc, v1 (seed 001) and v2 (seed 002).
type OperateProcRequest struct {
	Caller
	BizID        json.RawMessage `json:"bk_biz_id"` // integer; a decimal string is accepted
	OpType       *int            `json:"op_type"`
	ProcessInfos []ProcInfo      `json:"process_infos"`

	namespace string
	procs     []decodedProc
}

// decodedProc is a validated process_infos entry.
type decodedProc struct {
	name    string
	spec    proc.Spec
	targets []proc.Target
}

// DecodeOperateProc decodes and validates operate_proc (v1 and v2 alike: v2
// fields sent to v1 are honoured, never dropped).
//
// The result key's namespace is bk_biz_id in decimal and its name is
// value_key when given, else proc_name, so two processes sharing proc_name
// on one host need distinct value_keys (which GSE asks for too).
func DecodeOperateProc(body []byte) (*OperateProcRequest, error) {
	var r OperateProcRequest
	if err := decode(body, &r); err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

func (r *OperateProcRequest) validate() error {
	biz, present, err := intOrString("bk_biz_id", r.BizID)
	if err != nil {
		return err
	}
	if !present {
		return fieldErr("bk_biz_id", "is required")
	}
	if biz < 0 {
		return fieldErr("bk_biz_id", "must be >= 0, got %d", biz)
	}
	r.namespace = strconv.Itoa(biz)
	if r.OpType == nil {
		return fieldErr("op_type", "is required")
	}
	r.procs, err = decodeProcInfos(r.ProcessInfos, false)
	return err
}

// Items translates the request: one item per (ip, process), each with the
// spec its process_info describes.
func (r *OperateProcRequest) Items() (proc.OpType, []proc.Item) {
	return gseOp(*r.OpType), procItems(r.namespace, r.procs)
}

func procItems(namespace string, procs []decodedProc) []proc.Item {
	n := 0
	for _, p := range procs {
		n += len(p.targets)
	}
	items := make([]proc.Item, 0, n)
	for _, p := range procs {
		id := proc.ProcessID{Namespace: namespace, Name: p.name}
		for _, t := range p.targets {
			// Each item owns its Spec, so work on one host cannot change
			// another's; Labels and ConfigMap are shared and read-only.
			s := p.spec
			items = append(items, proc.Item{Target: t, Process: id, Spec: &s})
		}
	}
	return items
}

// hostProc is the duplicate-detection key within one request.
type hostProc struct {
	host proc.HostID
	name string
}

func decodeProcInfos(infos []ProcInfo, manage bool) ([]decodedProc, error) {
	if len(infos) == 0 {
		return nil, fieldErr("process_infos", "is required and must list at least one process")
	}
	out := make([]decodedProc, len(infos))
	seen := map[hostProc]string{}
	total := 0
	for i := range infos {
		f := indexed("process_infos", i)
		p := &infos[i]
		in, err := p.input(f, manage)
		if err != nil {
			return nil, err
		}
		spec, err := in.build()
		if err != nil {
			return nil, err
		}
		name, nameField := spec.ProcName, "proc_name"
		if p.ValueKey != "" {
			name, nameField = p.ValueKey, "value_key"
		}
		if err := validateProcessName(f+"."+nameField, name); err != nil {
			return nil, err
		}
		if len(p.IPList) == 0 {
			return nil, fieldErr(f+".ip_list", "is required and must list at least one IP")
		}
		total += len(p.IPList)
		if total > MaxHosts {
			return nil, fieldErr(f+".ip_list", "brings the request to %d (host, process) pairs; at most %d", total, MaxHosts)
		}
		targets := make([]proc.Target, len(p.IPList))
		for j, ip := range p.IPList {
			jf := indexed(f+".ip_list", j)
			t, err := ip.target(jf)
			if err != nil {
				return nil, err
			}
			k := hostProc{t.HostID(), name}
			if prev, dup := seen[k]; dup {
				hint := "give each process a distinct value_key"
				if strings.HasPrefix(prev, f+".") {
					hint = "a host is listed once per process"
				}
				return nil, fieldErr(jf, "duplicates %s: bk_cloud_id %d, ip %s, process %q (%s)", prev, t.CloudID, t.IP, name, hint)
			}
			seen[k] = jf
			targets[j] = t
		}
		out[i] = decodedProc{name: name, spec: spec, targets: targets}
	}
	return out, nil
}

func (ip IPRef) target(field string) (proc.Target, error) {
	return HostRef{IP: ip.IP, CloudID: ip.CloudID, SupplierID: ip.SupplierID}.target(field)
}

// input maps a process_infos entry under field f onto the one spec builder.
// manage selects seed 003's reading: setup_path and pid_path optional (a
// spec without a pid_path is refused per host when an op needs liveness),
// proc_owner the contact. Tolerant readings: a contact and a proc_owner that
// differ keep the form's own field (proc_owner for manage_proc, contact
// elsewhere); a missing proc_owner leaves no contact.
func (p *ProcInfo) input(f string, manage bool) (specInput, error) {
	contact := text{f + ".contact", p.Contact}
	if (manage && p.ProcOwner != "") || contact.v == "" {
		contact = text{f + ".proc_owner", p.ProcOwner}
	}
	funcID, _, err := stringOrInt(f+".func_id", p.FuncID)
	if err != nil {
		return specInput{}, err
	}
	instID, _, err := stringOrInt(f+".instance_id", p.InstanceID)
	if err != nil {
		return specInput{}, err
	}
	return specInput{
		procName: text{f + ".proc_name", p.ProcName}, setupPath: text{f + ".setup_path", p.SetupPath},
		pidPath: text{f + ".pid_path", p.PidPath}, cfgPath: text{f + ".cfg_path", p.CfgPath},
		logPath: text{f + ".log_path", p.LogPath}, account: text{f + ".account", p.Account},
		contact: contact, shellExt: text{f + ".cmd_shell_ext", p.CmdShellExt},
		funcID: text{f + ".func_id", funcID}, instanceID: text{f + ".instance_id", instID},
		valueKey: text{f + ".value_key", p.ValueKey},
		startCmd: text{f + ".start_cmd", p.StartCmd}, stopCmd: text{f + ".stop_cmd", p.StopCmd},
		restartCmd: text{f + ".restart_cmd", p.RestartCmd}, reloadCmd: text{f + ".reload_cmd", p.ReloadCmd},
		killCmd:     text{f + ".kill_cmd", p.KillCmd},
		instanceNum: number{f + ".instance_num", p.InstanceNum}, autoType: number{f + ".type", p.Type},
		cycleTime:     number{f + ".cycle_time", p.CycleTime},
		startCheck:    number{f + ".start_check_begin_time", p.StartCheckBeginTime},
		startCheckEnd: number{f + ".start_check_end_time", p.StartCheckEndTime},
		opTimeout:     number{f + ".op_timeout", p.OpTimeout},
		cpu:           percentage{f + ".cpu_lmt", p.CPULmt}, mem: percentage{f + ".mem_lmt", p.MemLmt},
		pathsRequired: !manage,
	}, nil
}

// ManageProcRequest is seed 003: register or unregister managed processes.
type ManageProcRequest struct {
	Caller
	ScopeType    string          `json:"bk_scope_type"`
	ScopeID      json.RawMessage `json:"bk_scope_id"` // string; a JSON integer is accepted
	OpType       *int            `json:"op_type"`
	ProcessInfos []ProcInfo      `json:"process_infos"`

	namespace string
	procs     []decodedProc
}

// Seed 003's op_type values.
const (
	ManageRegister   = 1
	ManageUnregister = 2
)

// ManageOp maps seed 003's op_type: 1 registers the spec and marks the
// process managed (the returned bool), 2 unregisters it. Any other value is
// accepted, like every op_type, and mapped to the invalid proc.OpType
// -1000-op so each host answers 832; values too large for that mapping
// become math.MinInt32, equally invalid.
func ManageOp(op int) (proc.OpType, bool) {
	switch op {
	case ManageRegister:
		return proc.OpSpecRegister, true
	case ManageUnregister:
		return proc.OpSpecUnregister, false
	}
	if op > -1000 && op < 1<<30 {
		return proc.OpType(-1000 - op), false
	}
	return proc.OpType(-1 << 31), false
}

// DecodeManageProc decodes and validates seed 003. The result key's
// namespace is bk_scope_id and its name value_key when given, else
// proc_name. proc_owner is the contact (seed 002 describes contact with the
// same words); setup_path and pid_path are optional as the seed says, and a
// spec without a pid_path is refused per host when an op needs liveness.
func DecodeManageProc(body []byte) (*ManageProcRequest, error) {
	var r ManageProcRequest
	if err := decode(body, &r); err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

func (r *ManageProcRequest) validate() error {
	switch r.ScopeType {
	case "":
		return fieldErr("bk_scope_type", "is required")
	case "biz", "biz_set":
	default:
		return fieldErr("bk_scope_type", "must be \"biz\" or \"biz_set\", got %q", r.ScopeType)
	}
	id, present, err := stringOrInt("bk_scope_id", r.ScopeID)
	if err != nil {
		return err
	}
	if !present || id == "" {
		return fieldErr("bk_scope_id", "is required and must not be empty")
	}
	if id[0] == '-' && isNumber(id) {
		return fieldErr("bk_scope_id", "must be >= 0, got %s", id)
	}
	if err := validateName("bk_scope_id", id); err != nil {
		return err
	}
	r.namespace = id
	if r.OpType == nil {
		return fieldErr("op_type", "is required")
	}
	r.procs, err = decodeProcInfos(r.ProcessInfos, true)
	return err
}

func isNumber(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

// Items translates the request; manage reports whether the processes are
// also to be marked managed (op_type 1).
func (r *ManageProcRequest) Items() (op proc.OpType, manage bool, items []proc.Item) {
	op, manage = ManageOp(*r.OpType)
	return op, manage, procItems(r.namespace, r.procs)
}

// Namespace is the result keys' namespace: bk_scope_id.
func (r *ManageProcRequest) Namespace() string { return r.namespace }

// Namespace is the result keys' namespace: bk_biz_id in decimal.
func (r *OperateProcRequest) Namespace() string { return r.namespace }

// operateProcShape is just enough of an operate_proc body to tell its two
// forms apart.
type operateProcShape struct {
	Meta         json.RawMessage `json:"meta"`
	BizID        json.RawMessage `json:"bk_biz_id"`
	ProcessInfos json.RawMessage `json:"process_infos"`
}

// isMetaForm tells operate_proc's two forms apart by the body's shape: meta
// (with hosts or agent_id_list, op_type and an optional spec) is GSE 2.0's
// form, which the older node-manager client also posts as the
// operate_process body; bk_biz_id with process_infos is the seeds' form. A
// body with both, or neither, is refused naming the fields.
func isMetaForm(body []byte) (bool, error) {
	var sh operateProcShape
	if err := decode(body, &sh); err != nil {
		return false, err
	}
	meta := !isNull(sh.Meta)
	seeds := !isNull(sh.BizID) || !isNull(sh.ProcessInfos)
	switch {
	case meta && seeds:
		return false, fieldErr("meta", "cannot be sent with bk_biz_id or process_infos: the body mixes operate_proc's two forms; send meta with hosts or agent_id_list (GSE 2.0), or bk_biz_id with process_infos")
	case !meta && !seeds:
		return false, fieldErr("(body)", "is neither form of operate_proc: send meta with hosts or agent_id_list (GSE 2.0), or bk_biz_id with process_infos")
	}
	return meta, nil
}

// metaFormRequest is operate_proc's GSE 2.0 form: one operate_proc_multi
// entry as the whole body.
type metaFormRequest struct {
	Caller
	MultiEntry
}

// decodeMetaForm decodes operate_proc's meta form.
func decodeMetaForm(body []byte) (*metaFormRequest, error) {
	var r metaFormRequest
	if err := decode(body, &r); err != nil {
		return nil, err
	}
	if err := r.MultiEntry.decode(""); err != nil {
		return nil, err
	}
	return &r, nil
}
