package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// statusFields are the status content fields the table shows. Only fields
// whose JSON types stay the same across GSE agent versions are read; the
// start time is derived from report_time and elapsedTime for that reason.
type statusFields struct {
	Process []struct {
		Instance []struct {
			Pid         int     `json:"pid"`
			CPUUsage    float64 `json:"cpuUsage"`
			PhyMemUsage float64 `json:"phyMemUsage"`
			ElapsedTime int64   `json:"elapsedTime"`
			IsAuto      bool    `json:"isAuto"`
			Version     string  `json:"version"`
			ThreadCount int     `json:"threadCount"`
			Cmdline     string  `json:"cmdline"`
			ReportTime  int64   `json:"report_time"`
		} `json:"instance"`
	} `json:"process"`
}

// hostOfKey is the cloud:ip of a result key cloud:supplier:ip:ns:name.
func hostOfKey(key string) string {
	parts := strings.Split(key, ":")
	if len(parts) < 5 {
		return key
	}
	// An IPv6 ip holds colons of its own: it is everything between the
	// supplier and the last two fields.
	return parts[0] + ":" + strings.Join(parts[2:len(parts)-2], ":")
}

// printStatusTable prints one row per host of a status op; wide adds the
// start time, threads and command line.
func printStatusTable(w io.Writer, rows []recapRow, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "HOST\tCODE\tPID\tUPTIME\tCPU%\tMEM%\tMANAGED\tVERSION"
	if wide {
		head += "\tSTARTED\tTHREADS"
	}
	head += "\tMESSAGE"
	if wide {
		head += "\tCMDLINE"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		cells := []string{hostOfKey(r.Key), strconv.Itoa(int(r.Code)), "-", "-", "-", "-", "-", "-"}
		started, threads, cmdline := "-", "-", "-"
		var c statusFields
		if json.Unmarshal([]byte(r.Content), &c) == nil && len(c.Process) > 0 && len(c.Process[0].Instance) > 0 {
			in := c.Process[0].Instance[0]
			cells[6] = yesNo(in.IsAuto)
			if in.Version != "" {
				cells[7] = in.Version
			}
			if in.Pid > 0 {
				cells[2], cells[3] = strconv.Itoa(in.Pid), uptime(in.ElapsedTime)
				cells[4], cells[5] = percent(in.CPUUsage), percent(in.PhyMemUsage)
				if in.ReportTime > 0 {
					started = time.Unix(in.ReportTime-in.ElapsedTime, 0).UTC().Format(time.RFC3339)
				}
				threads, cmdline = strconv.Itoa(in.ThreadCount), in.Cmdline
			}
		}
		if wide {
			cells = append(cells, started, threads)
		}
		cells = append(cells, r.Message)
		if wide {
			cells = append(cells, cmdline)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// percent shows small shares instead of rounding them to zero: one small
// process on a large host is well under 0.01 %.
func percent(f float64) string {
	switch {
	case f == 0:
		return "0"
	case f < 0.01:
		return strconv.FormatFloat(f, 'f', 4, 64)
	case f < 10:
		return strconv.FormatFloat(f, 'f', 2, 64)
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

// uptime is a duration the way ps and kubectl print ages: the two largest
// units.
func uptime(secs int64) string {
	if secs < 0 {
		return "-"
	}
	d, h, m, s := secs/86400, secs/3600%24, secs/60%60, secs%60
	switch {
	case d > 0:
		return fmt.Sprintf("%dd%dh", d, h)
	case h > 0:
		return fmt.Sprintf("%dh%dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm%ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}
