package testbed

import (
	"fmt"
	"strconv"
	"strings"
)

// StartSample starts a long-running program called name on the host: a copy
// of sleep at /data/<ns>/<name>, detached from any session, with its pid in
// /data/<ns>/<name>.pid, the layout a status request for (ns, name) reads.
// account "" runs it as root. It returns the program's pid.
func (h *Host) StartSample(ns, name, account string) (int, error) {
	dir := "/data/" + ns
	run := fmt.Sprintf("cd %s; setsid ./%s 86400 </dev/null >/dev/null 2>&1 & echo $! > %s.pid", shq(dir), shq(name), shq(name))
	if account != "" && account != "root" {
		run = fmt.Sprintf("chown %s %s && su -s /bin/sh %s -c %s", shq(account), shq(dir), shq(account), shq(run))
	}
	script := fmt.Sprintf("set -e; mkdir -p %s; cp \"$(command -v sleep)\" %s/%s; %s; sleep 0.1; cat %s/%s.pid",
		shq(dir), shq(dir), shq(name), run, shq(dir), shq(name))
	out, err := h.Exec(script)
	if err != nil {
		return 0, fmt.Errorf("start sample %s/%s on %s: %w", ns, name, h.IP, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return 0, fmt.Errorf("start sample %s/%s on %s: pid %q: %w", ns, name, h.IP, out, err)
	}
	return pid, nil
}

// shq single-quotes a value for sh. The transport package has the
// production quoting; the test bed keeps its own so it depends on nothing
// it is used to test.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }
