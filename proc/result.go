package proc

import (
	"encoding/json"
	"fmt"
	"time"
)

// HostResult is the outcome of an op for one process on one host, as
// get_proc_operate_result reports it.
type HostResult struct {
	Code    Code   `json:"error_code"`
	Message string `json:"error_msg"`
	// Content is a JSON document encoded as a string, as GSE callers expect.
	Content string `json:"content"`
}

// Fail builds a result for a failure with a specific message.
func Fail(code Code, format string, args ...any) HostResult {
	return HostResult{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Pending is the result of a host whose op has not finished.
func Pending() HostResult { return HostResult{Code: CodeRunning, Message: CodeRunning.Message()} }

// NotRunningMessage is the agent's wording for a process that is not alive.
func NotRunningMessage(procName string) string {
	return fmt.Sprintf("process(%s) is not running", procName)
}

// StatusInstance is one entry of the status content's instance list. Field
// names follow the GSE agent's status document.
type StatusInstance struct {
	ProcessName   string  `json:"processName"`
	Version       string  `json:"version"`
	Health        int     `json:"health"` // 1 healthy, 0 unhealthy or unknown
	IsAuto        bool    `json:"isAuto"`
	CPUUsage      float64 `json:"cpuUsage"`
	CPUUsageAve   float64 `json:"cpuUsageAve"`
	PhyMemUsage   float64 `json:"phyMemUsage"`
	UsePhyMem     uint64  `json:"usePhyMem"`
	Pid           int     `json:"pid"` // -1 when not running
	StartTime     int64   `json:"startTime"`
	Stat          string  `json:"stat"`
	UTime         uint64  `json:"utime"`
	STime         uint64  `json:"stime"`
	ThreadCount   int     `json:"threadCount"`
	ElapsedTime   int64   `json:"elapsedTime"`
	Cmdline       string  `json:"cmdline"`
	RegisterTime  int64   `json:"register_time"`
	LastStartTime int64   `json:"last_start_time"`
	ReportTime    int64   `json:"report_time"`
	// Expected is drover's addition: the process should be running (it
	// was started and not stopped since), managed or not.
	Expected bool `json:"expected"`
	// ConfigDrift lists configmap files whose md5 differs from the
	// registered one (drover's addition).
	ConfigDrift []string `json:"configDrift,omitempty"`
}

// StatusProcess groups the instances of one process name.
type StatusProcess struct {
	ProcName string           `json:"procname"`
	Instance []StatusInstance `json:"instance"`
}

// StatusContent is the content of a status (op_type 2) result.
type StatusContent struct {
	IP       string          `json:"ip"`
	UTCTime  string          `json:"utctime"`
	Timezone string          `json:"timezone"`
	Process  []StatusProcess `json:"process"`
}

// Registration is what the registry knows of a process beyond its spec; the
// zero value means "not registered / never started by drover".
type Registration struct {
	Managed       bool  `json:"managed"`
	RegisterTime  int64 `json:"register_time"`
	LastStartTime int64 `json:"last_start_time"`
	// Expected: started and not stopped since, managed or not.
	Expected bool `json:"expected,omitempty"`
	// Drifted lists configmap files seen with another md5.
	Drifted []string `json:"drifted,omitempty"`
}

// StatusExtras are status fields that come from optional commands.
type StatusExtras struct {
	Version string
	Healthy bool
}

// BuildStatus assembles the status content from one probe.
func BuildStatus(ip string, spec Spec, host HostInfo, s Sample, alive bool, reg Registration, ex StatusExtras) StatusContent {
	inst := StatusInstance{
		ProcessName: spec.ProcName, Pid: -1, IsAuto: reg.Managed,
		RegisterTime: reg.RegisterTime, LastStartTime: reg.LastStartTime, ReportTime: host.Now,
		Version: ex.Version, Expected: reg.Expected || reg.Managed, ConfigDrift: reg.Drifted,
	}
	if alive {
		inst.Pid = s.Pid
		inst.CPUUsage = round4(CPUPercent(s))
		inst.CPUUsageAve = round4(CPUPercentLifetime(s, host))
		inst.PhyMemUsage = round4(MemPercent(s, host))
		inst.UsePhyMem = s.RSSBytes
		inst.StartTime = StartUnix(s, host)
		inst.Stat = s.State
		inst.UTime, inst.STime = s.UTime, s.STime
		inst.ThreadCount = s.Threads
		inst.ElapsedTime = ElapsedSeconds(s, host)
		inst.Cmdline = s.Cmdline
		if ex.Healthy {
			inst.Health = 1
		}
	}
	return StatusContent{
		IP:       ip,
		UTCTime:  time.Unix(host.Now, 0).UTC().Format("2006-01-02 15:04:05"),
		Timezone: host.Timezone,
		Process:  []StatusProcess{{ProcName: spec.ProcName, Instance: []StatusInstance{inst}}},
	}
}

// round4 keeps small shares visible: one small process on a large host is
// well under 0.01 %.
func round4(f float64) float64 { return float64(int64(f*10000+0.5)) / 10000 }

// ControlValue is one entry of a control op's content.
type ControlValue struct {
	ProcName   string `json:"procName"`
	SetupPath  string `json:"setupPath"`
	FuncID     string `json:"funcID"`
	InstanceID string `json:"instanceID"`
	Result     string `json:"result"` // "success" or the error text
	IsAuto     bool   `json:"isAuto"`
}

// ControlContent is the content of start/stop/register/... results.
type ControlContent struct {
	Value []ControlValue `json:"value"`
}

// EncodeContent renders a content document as the JSON string GSE returns.
func EncodeContent(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
