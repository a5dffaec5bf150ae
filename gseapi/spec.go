package gseapi

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/drover-sh/drover/proc"
)

// specInput is a process spec in either request form: process_infos' flat
// fields (operate_proc v1 and v2, manage_proc) or the nested spec object
// (register_proc_info and friends, operate_proc_multi, the meta form of
// operate_proc). Each value carries the request field it came from. One
// builder, build, validates and translates both, so every rule holds for
// every API at once.
//
// The rules kept are those that guard the hosts: names and paths that reach
// a shell or a file system, ranges the documents state, and bounds that keep
// durations sane. Everything else has a tolerant reading, documented where
// it is applied and in docs/http-api.md.
type specInput struct {
	procName, setupPath, pidPath, cfgPath, logPath, account text
	contact, shellExt, funcID, instanceID, valueKey         text
	startCmd, stopCmd, restartCmd, reloadCmd, killCmd       text
	versionCmd, healthCmd                                   text
	crontab                                                 text

	instanceNum, autoType, cycleTime       number
	startCheck, startCheckEnd, stopCheck   number
	startRetries, startInterval, opTimeout number
	cpu, mem                               percentage
	configMap                              []ConfigMapJSON
	configMapField                         string
	labels                                 map[string]json.RawMessage
	reportID                               int
	// pathsRequired: setup_path and pid_path must be given (every form
	// but seed 003's, which documents them as optional).
	pathsRequired bool
}

// text is a string field and its request path.
type text struct {
	field, v string
}

// number is an integer field and its request path; nil is absent.
type number struct {
	field string
	v     *int
}

// percentage is a cpu or mem limit and its request path; nil is absent.
type percentage struct {
	field string
	v     *float64
}

// build validates every field and makes the domain spec.
func (in specInput) build() (proc.Spec, error) {
	var s proc.Spec
	if err := validateProcName(in.procName.field, in.procName.v); err != nil {
		return s, err
	}
	for _, p := range []struct {
		t        text
		required bool
	}{
		{in.setupPath, in.pathsRequired}, {in.pidPath, in.pathsRequired},
		{in.cfgPath, false}, {in.logPath, false},
	} {
		if err := validatePath(p.t.field, p.t.v, p.required); err != nil {
			return s, err
		}
	}
	// An account left out is root, the agent's documented default.
	if err := validateAccount(in.account.field, in.account.v); err != nil {
		return s, err
	}
	ext, err := shellExt(in.shellExt.field, in.shellExt.v)
	if err != nil {
		return s, err
	}
	for _, c := range []text{in.startCmd, in.stopCmd, in.restartCmd, in.reloadCmd, in.killCmd, in.versionCmd, in.healthCmd} {
		if err := validateCommand(c.field, c.v); err != nil {
			return s, err
		}
	}
	for _, t := range []text{in.contact, in.funcID, in.instanceID} {
		if err := validateText(t.field, t.v); err != nil {
			return s, err
		}
	}
	auto, err := autoType(in.autoType)
	if err != nil {
		return s, err
	}
	durations := make([]time.Duration, 6)
	for i, n := range []struct {
		num number
		max int
	}{
		{in.cycleTime, MaxPeriodSecs}, {in.startCheck, MaxCheckSecs}, {in.startCheckEnd, MaxCheckSecs},
		{in.stopCheck, MaxCheckSecs}, {in.startInterval, MaxPeriodSecs}, {in.opTimeout, MaxOpTimeoutSecs},
	} {
		if durations[i], err = seconds(n.num.field, n.num.v, n.max); err != nil {
			return s, err
		}
	}
	cycle, startCheck, startCheckEnd, stopCheck, interval, opTimeout := durations[0], durations[1], durations[2], durations[3], durations[4], durations[5]
	// An end before the begin leaves one check, at the begin time: nothing
	// in the documents orders the two, and the begin is the caller's
	// explicit wait.
	if startCheckEnd < startCheck {
		startCheckEnd = 0
	}
	instNum, retries := count(in.instanceNum), count(in.startRetries)
	cpu, err := percent(in.cpu.field, in.cpu.v)
	if err != nil {
		return s, err
	}
	mem, err := percent(in.mem.field, in.mem.v)
	if err != nil {
		return s, err
	}
	rule, err := crontabRule(in.crontab, auto)
	if err != nil {
		return s, err
	}
	cm, err := configMap(in.configMapField, in.configMap)
	if err != nil {
		return s, err
	}
	if in.valueKey.v != "" {
		if err := validateProcessName(in.valueKey.field, in.valueKey.v); err != nil {
			return s, err
		}
	}
	return proc.Spec{
		ProcName:      in.procName.v,
		SetupPath:     in.setupPath.v,
		PidPath:       pidFile(in.pidPath.v, in.procName.v),
		ConfigPath:    in.cfgPath.v,
		LogPath:       in.logPath.v,
		Account:       in.account.v,
		Contact:       in.contact.v,
		ShellExt:      ext,
		Labels:        in.labels,
		StartCmd:      in.startCmd.v,
		StopCmd:       in.stopCmd.v,
		RestartCmd:    in.restartCmd.v,
		ReloadCmd:     in.reloadCmd.v,
		KillCmd:       in.killCmd.v,
		VersionCmd:    in.versionCmd.v,
		HealthCmd:     in.healthCmd.v,
		FuncID:        in.funcID.v,
		InstanceID:    in.instanceID.v,
		ValueKey:      in.valueKey.v,
		InstanceNum:   instNum,
		CPULimit:      cpu,
		MemLimit:      mem,
		AutoType:      auto,
		CycleTime:     cycle,
		CrontabRule:   rule,
		StartCheck:    startCheck,
		StartCheckEnd: startCheckEnd,
		StopCheck:     stopCheck,
		StartRetries:  retries,
		StartInterval: interval,
		OpTimeout:     opTimeout,
		ConfigMap:     cm,
		ReportID:      in.reportID,
	}, nil
}

// autoType reads type / auto_type. Left out, it is resident (1): the seed
// examples of plain operate calls omit it, and a periodic process needs a
// schedule those callers never send. Values outside the documented 0, 1, 2
// are refused: no reading of them is safe to run.
func autoType(n number) (proc.AutoType, error) {
	if n.v == nil {
		return proc.AutoResident, nil
	}
	switch a := proc.AutoType(*n.v); a {
	case proc.AutoPeriodic, proc.AutoResident, proc.AutoOneShot:
		return a, nil
	}
	return 0, fieldErr(n.field, "must be 0 (periodic), 1 (resident) or 2 (one-shot), got %d", *n.v)
}

// count reads a non-negative count; absent, zero and negative all mean the
// default (0 here, filled in by policies): a negative count has no other
// sensible reading.
func count(n number) int {
	if n.v == nil || *n.v < 0 {
		return 0
	}
	return *n.v
}

// crontabRule checks the schedule of a periodic process. A rule given for
// another auto_type has no effect (seed 004) and is dropped. A periodic
// process with neither a rule nor a cycle_time is accepted: it runs when an
// operator starts it and is never scheduled. A rule that is given must
// parse: a malformed schedule has no reading that runs anything when the
// operator meant.
func crontabRule(t text, auto proc.AutoType) (string, error) {
	rule := strings.TrimSpace(t.v)
	if auto != proc.AutoPeriodic || rule == "" {
		return "", nil
	}
	if err := validateText(t.field, rule); err != nil {
		return "", err
	}
	if d, ok := strings.CutPrefix(rule, "@every "); ok {
		// The parser silently turns a zero or negative interval into one
		// second; a caller who wrote that meant something else.
		if iv, err := time.ParseDuration(strings.TrimSpace(d)); err == nil && iv < time.Second {
			return "", fieldErr(t.field, "%q: the interval must be at least 1s", rule)
		}
	}
	sched, err := parseCron(rule)
	if err != nil {
		return "", fieldErr(t.field, "%q is not a cron rule (minute hour day-of-month month day-of-week, or a descriptor such as @every 30s): %v", rule, err)
	}
	if sched.Next(time.Now()).IsZero() {
		return "", fieldErr(t.field, "%q never fires", rule)
	}
	return rule, nil
}

// configMap reads spec.configmap. A path must be absolute (it is read on
// the host). Tolerant readings: an entry without a path is dropped (nothing
// to watch; seed 004's example sends an empty placeholder); an empty md5
// means "no expected checksum", so the file is never reported as drifted;
// any other md5 is kept, lower-cased, and a value that is not a real md5
// simply never matches, which drift then shows; a path listed twice keeps
// its last entry.
func configMap(f string, in []ConfigMapJSON) ([]proc.ConfigFile, error) {
	var out []proc.ConfigFile
	at := map[string]int{}
	for i, c := range in {
		if c.Path == "" {
			continue
		}
		if err := validatePath(indexed(f, i)+".path", c.Path, true); err != nil {
			return nil, err
		}
		md5 := strings.ToLower(strings.TrimSpace(c.MD5))
		if err := validateText(indexed(f, i)+".md5", md5); err != nil {
			return nil, err
		}
		var src *proc.FileRef
		if c.Source != nil {
			if !validSHA256(c.Source.SHA256) {
				return nil, fieldErr(indexed(f, i)+".source.sha256", "must be a sha256 in lower-case hex (64 characters), got %q", c.Source.SHA256)
			}
			src = &proc.FileRef{SHA256: c.Source.SHA256}
		}
		if j, dup := at[c.Path]; dup {
			out[j].MD5, out[j].Source = md5, src
			continue
		}
		at[c.Path] = len(out)
		out = append(out, proc.ConfigFile{Path: c.Path, MD5: md5, Source: src})
	}
	return out, nil
}
