package proc

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
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

// KeyedResult is one item's result under its documented (v1) result key.
// AgentID is the agent id the caller named the host by, so the v2 key
// (agent_id:namespace:name) can be given back too.
type KeyedResult struct {
	Key     string `json:"key"`
	AgentID string `json:"agent_id,omitempty"`
	HostResult
}

// ByKey indexes results by their v1 key.
func ByKey(list []KeyedResult) map[string]HostResult {
	m := make(map[string]HostResult, len(list))
	for _, r := range list {
		m[r.Key] = r.HostResult
	}
	return m
}

// Fail builds a result for a failure with a specific message.
func Fail(code Code, format string, args ...any) HostResult {
	return HostResult{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Pending is the result of a host whose op has not finished.
func Pending() HostResult { return HostResult{Code: CodeRunning, Message: CodeRunning.Message()} }

// Done reports whether the host has answered: 115 is still pending.
func (r HostResult) Done() bool { return r.Code != CodeRunning }

// Failed reports whether the host answered, and not with success. A host
// still pending (115) has not failed: it is counted when it answers.
func (r HostResult) Failed() bool { return r.Done() && r.Code != CodeSuccess }

// CountFailed counts the results that Failed.
func CountFailed[R interface{ Failed() bool }](results []R) int {
	n := 0
	for _, r := range results {
		if r.Failed() {
			n++
		}
	}
	return n
}

// NotRunningMessage is the agent's wording for a process that is not alive.
func NotRunningMessage(procName string) string {
	return fmt.Sprintf("process(%s) is not running", procName)
}

// StatusInstance is one entry of the status content's instance list. Field
// names and JSON types follow the GSE 2.0 agent's status document, which Go
// callers unmarshal with fixed types: health, startTime, utime and stime are
// strings there.
type StatusInstance struct {
	ProcessName string  `json:"processName"`
	Version     string  `json:"version"`
	Health      string  `json:"health"` // "1" healthy, "0" unhealthy, not running or unknown
	IsAuto      bool    `json:"isAuto"`
	CPUUsage    float64 `json:"cpuUsage"`
	CPUUsageAve float64 `json:"cpuUsageAve"`
	PhyMemUsage float64 `json:"phyMemUsage"`
	UsePhyMem   uint64  `json:"usePhyMem"`
	// DiskSize is not measured (an agentless probe does not walk the
	// process's files): always 0.
	DiskSize      int64  `json:"diskSize"`
	Pid           int    `json:"pid"`       // -1 when not running
	StartTime     string `json:"startTime"` // unix seconds, in decimal; "" when not running
	Stat          string `json:"stat"`
	UTime         string `json:"utime"` // clock ticks, in decimal
	STime         string `json:"stime"`
	ThreadCount   int    `json:"threadCount"`
	ElapsedTime   int64  `json:"elapsedTime"`
	Cmdline       string `json:"cmdline"`
	RegisterTime  int64  `json:"register_time"`
	LastStartTime int64  `json:"last_start_time"`
	ReportTime    int64  `json:"report_time"`
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

// StatusContent is the content of a status (op_type 2) result, as the GSE
// 2.0 agent emits it.
type StatusContent struct {
	IP string `json:"ip"`
	// AgentID is the agent id the caller named the host by, or
	// "<bk_cloud_id>:<ip>" (GSE 2.0's id for a host without one).
	AgentID string `json:"bk_agent_id"`
	// UTCTime is the host's clock in UTC, "2006-01-02 15:04:05".
	UTCTime string `json:"utctime"`
	// UTCTime2 is the same instant in the host's own zone, RFC 3339 with
	// its offset ("2026-11-23T15:48:14+08:00").
	UTCTime2 string `json:"utctime2"`
	// Timezone is the host's offset from UTC in whole hours (8 for
	// UTC+0800); a zone with minutes keeps its full offset in UTCTime2.
	Timezone int             `json:"timezone"`
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

// BuildStatus assembles the status content from one probe of target.
func BuildStatus(target Target, spec Spec, host HostInfo, s Sample, alive bool, reg Registration, ex StatusExtras) StatusContent {
	inst := StatusInstance{
		ProcessName: spec.ProcName, Pid: -1, IsAuto: reg.Managed, Health: "0", UTime: "0", STime: "0",
		RegisterTime: reg.RegisterTime, LastStartTime: reg.LastStartTime, ReportTime: host.Now,
		Version: ex.Version, Expected: reg.Expected || reg.Managed, ConfigDrift: reg.Drifted,
	}
	if alive {
		inst.Pid = s.Pid
		inst.CPUUsage = round4(CPUPercent(s))
		inst.CPUUsageAve = round4(CPUPercentLifetime(s, host))
		inst.PhyMemUsage = round4(MemPercent(s, host))
		inst.UsePhyMem = s.RSSBytes
		inst.StartTime = strconv.FormatInt(StartUnix(s, host), 10)
		inst.Stat = s.State
		inst.UTime, inst.STime = strconv.FormatUint(s.UTime, 10), strconv.FormatUint(s.STime, 10)
		inst.ThreadCount = s.Threads
		inst.ElapsedTime = ElapsedSeconds(s, host)
		inst.Cmdline = s.Cmdline
		if ex.Healthy {
			inst.Health = "1"
		}
	}
	offset := ZoneOffset(host.Timezone)
	now := time.Unix(host.Now, 0)
	return StatusContent{
		IP:       target.IP,
		AgentID:  target.AgentIDOrHost(),
		UTCTime:  now.UTC().Format("2006-01-02 15:04:05"),
		UTCTime2: now.In(time.FixedZone(host.Timezone, offset)).Format(time.RFC3339),
		Timezone: offset / 3600,
		Process:  []StatusProcess{{ProcName: spec.ProcName, Instance: []StatusInstance{inst}}},
	}
}

// ZoneOffset reads the probe's zone ("UTC+0800", "UTC-0530") as seconds
// east of UTC; anything else is UTC.
func ZoneOffset(zone string) int {
	z := strings.TrimPrefix(zone, "UTC")
	if len(z) != 5 || (z[0] != '+' && z[0] != '-') {
		return 0
	}
	h, err1 := strconv.Atoi(z[1:3])
	m, err2 := strconv.Atoi(z[3:5])
	if err1 != nil || err2 != nil || h > 14 || m > 59 {
		return 0
	}
	sec := h*3600 + m*60
	if z[0] == '-' {
		sec = -sec
	}
	return sec
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
