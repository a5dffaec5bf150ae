package proc

import (
	"encoding/json"
	"time"
)

// AutoType is GSE's monitor_policy.auto_type.
type AutoType int

const (
	AutoPeriodic AutoType = 0 // run every cycle_time or by crontab_rule
	AutoResident AutoType = 1 // kept running
	AutoOneShot  AutoType = 2 // run once; exit is not a failure
)

// ShellExt is cmd_shell_ext: which interpreter control commands are for.
type ShellExt string

const (
	ShellSh  ShellExt = "sh"
	ShellBat ShellExt = "bat"
	ShellPS1 ShellExt = "ps1"
)

// ConfigFile is a configmap entry: a file whose md5 is watched for drift.
type ConfigFile struct {
	Path string `json:"path"`
	MD5  string `json:"md5"`
	// Source is the content the file should have, in the content store:
	// what repair restores. A push sets it; a request may name one.
	Source *FileRef `json:"source,omitempty"`
	// Mode is the file's mode when repair writes it; 0 means 0644.
	Mode uint32 `json:"mode,omitempty"`
}

// Spec is everything drover knows about one process on one host. All GSE
// request shapes translate into it; durations are already defaulted.
type Spec struct {
	ProcName   string                     `json:"proc_name"`
	SetupPath  string                     `json:"setup_path"`
	PidPath    string                     `json:"pid_path"`
	ConfigPath string                     `json:"config_path,omitempty"`
	LogPath    string                     `json:"log_path,omitempty"`
	Account    string                     `json:"account,omitempty"`
	Contact    string                     `json:"contact,omitempty"`
	ShellExt   ShellExt                   `json:"cmd_shell_ext,omitempty"`
	Labels     map[string]json.RawMessage `json:"labels,omitempty"` // as sent: any JSON scalar

	StartCmd   string `json:"start_cmd,omitempty"`
	StopCmd    string `json:"stop_cmd,omitempty"`
	RestartCmd string `json:"restart_cmd,omitempty"`
	ReloadCmd  string `json:"reload_cmd,omitempty"`
	KillCmd    string `json:"kill_cmd,omitempty"`
	VersionCmd string `json:"version_cmd,omitempty"`
	HealthCmd  string `json:"health_cmd,omitempty"`

	FuncID      string `json:"func_id,omitempty"`
	InstanceID  string `json:"instance_id,omitempty"`
	ValueKey    string `json:"value_key,omitempty"`
	InstanceNum int    `json:"instance_num,omitempty"`

	CPULimit float64 `json:"cpu_lmt,omitempty"` // percent of the whole host, 0 = none
	MemLimit float64 `json:"mem_lmt,omitempty"` // percent of host memory, 0 = none

	AutoType    AutoType      `json:"auto_type"`
	CycleTime   time.Duration `json:"cycle_time,omitempty"`
	CrontabRule string        `json:"crontab_rule,omitempty"`
	// StartCheck is when, after a start, liveness is first checked
	// (start_check_secs, start_check_begin_time); StartCheckEnd, when set
	// and later, is until when the process must stay alive to pass.
	StartCheck    time.Duration `json:"start_check,omitempty"`
	StartCheckEnd time.Duration `json:"start_check_end,omitempty"`
	StopCheck     time.Duration `json:"stop_check,omitempty"`
	StartRetries  int           `json:"start_retries,omitempty"`
	StartInterval time.Duration `json:"start_interval,omitempty"`
	OpTimeout     time.Duration `json:"op_timeout,omitempty"`

	ConfigMap []ConfigFile `json:"configmap,omitempty"`
	ReportID  int          `json:"report_id,omitempty"`
}

// Index is the value_key: the process's identity among the managed
// processes of one host. GSE's rule: setup_path + "/" + proc_name when empty.
func (s Spec) Index() string {
	if s.ValueKey != "" {
		return s.ValueKey
	}
	return joinPath(s.SetupPath, s.ProcName)
}

func joinPath(dir, name string) string {
	for len(dir) > 1 && dir[len(dir)-1] == '/' {
		dir = dir[:len(dir)-1]
	}
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}
