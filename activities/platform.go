package activities

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// platform is what differs between the operating systems drover manages:
// the language of its scripts, how a probe reads the host, and the
// job-platform's default commands. The host's transport picks it, so an
// op's logic is the same on Linux and Windows.
type platform interface {
	// shell is the language of every script the platform builds.
	shell() transport.Shell
	// fits reports why a spec cannot run on this platform, or "".
	fits(spec proc.Spec) string
	// account is the Command.Account for the spec's account.
	account(spec proc.Spec) string
	// ranAs reports whether the user a probe ran as is the spec's account.
	ranAs(user string, spec proc.Spec) bool
	// statusScript probes spec's pid file; window > 0 measures current
	// cpu, extras adds version_cmd and health_cmd.
	statusScript(spec proc.Spec, window time.Duration, extras bool) string
	// watchScript is one supervision poll of every entry; each health
	// check is bounded by health on its own. known[i], when set, is the
	// "PID STARTTICKS" of entry i's process as the last poll found it
	// alive: a platform may skip what it already knows of it, and of the
	// host, when host is set.
	watchScript(entries []WatchEntry, health time.Duration, known []string, host *hostKnown) string
	parseProbe(out string, n int) (proc.HostInfo, []proc.Sample, error)
	alive(s proc.Sample, procName string) bool
	controlScript(spec proc.Spec, cmd string) string
	// checkedControlScript is controlScript followed, in the same exec, by
	// a probe after wait (see checkedControlScript), or "" when the
	// platform runs them apart.
	checkedControlScript(spec proc.Spec, cmd string, wait time.Duration, anyExit bool) string
	// signalScript stops the probed incarnation: sig is TERM or KILL; with
	// wait > 0 a TERM is followed by KILL after wait.
	signalScript(pid int, startTicks uint64, sig string, wait time.Duration) string
	defaultCommand(verb string, spec proc.Spec) string
	// whoami prints the user it runs as, as whoamiOf reads it: the host
	// check's command, as cheap as the platform allows.
	whoami() string
	whoamiOf(out string) (string, error)
}

func platformFor(h inventory.Host) platform {
	if h.Transport == inventory.TransportWinRM {
		return windowsPlatform{login: h.User}
	}
	return linuxPlatform{login: h.User}
}

// linuxPlatform is POSIX sh reading /proc, over SSH, logged in as login.
type linuxPlatform struct{ login string }

func (linuxPlatform) shell() transport.Shell { return transport.ShellSh }

func (linuxPlatform) fits(spec proc.Spec) string {
	if spec.ShellExt != proc.ShellSh {
		return fmt.Sprintf("cmd_shell_ext %q needs a Windows (winrm) host", spec.ShellExt)
	}
	return ""
}

func (linuxPlatform) account(spec proc.Spec) string       { return spec.Account }
func (linuxPlatform) ranAs(u string, spec proc.Spec) bool { return u == spec.Account }

func (linuxPlatform) statusScript(spec proc.Spec, window time.Duration, extras bool) string {
	script := ProbeScript([]string{spec.PidPath}, window)
	if extras {
		script += extrasScript(spec)
	}
	return script
}

// watchScript is the one exec of a poll: every pid file, every health_cmd,
// and the md5 of every watched config file. The poll itself runs as the
// login user; health_cmd and the md5s run as each spec's account, as its
// start and stop do, so they see what the process sees. Health checks and
// md5s run side by side, each bounded by health on its own: a slow one is
// reported as such (or, for an md5, says nothing) and never holds up the
// poll.
func (l linuxPlatform) watchScript(entries []WatchEntry, health time.Duration, known []string, host *hostKnown) string {
	paths := make([]string, len(entries))
	for i, e := range entries {
		paths[i] = e.Spec.PidPath
	}
	var b strings.Builder
	b.WriteString(probeScript(paths, 0, known, host))
	secs := strconv.FormatFloat(health.Seconds(), 'f', -1, 64)
	for i, e := range entries {
		pre := l.sudo(e.Spec.Account)
		if e.Spec.HealthCmd != "" {
			// The check prints its exit status itself, so a sudo that
			// refused (no status printed) is told apart from a failing
			// check: it is reported as "sudo", and decides nothing.
			fmt.Fprintf(&b, "(r=$(%ssh -c %s sh %s %s %s 2>/dev/null); printf 'Z\\t%d\\t%%s\\n' \"${r:-sudo}\") &\n",
				pre, transport.ShellQuote(healthCheck), transport.ShellQuote(e.Spec.SetupPath), transport.ShellQuote(e.Spec.HealthCmd), secs, i)
		}
		for j, c := range e.Spec.ConfigMap {
			if c.Path == "" || c.MD5 == "" {
				continue
			}
			// Bounded and side by side like the health checks: a config
			// path that never answers (a FIFO, a hung mount) says nothing
			// this poll instead of failing it, and so does one the account
			// cannot read (no line printed); a file that is gone prints
			// an empty md5, which is drift.
			fmt.Fprintf(&b, "(r=$(%stimeout -k 1 %s sh -c %s sh %s 2>/dev/null); [ -z \"$r\" ] || printf 'M\\t%d\\t%d\\t%%s\\n' \"${r#gone}\") &\n",
				pre, secs, transport.ShellQuote(configMD5), transport.ShellQuote(c.Path), i, j)
		}
	}
	b.WriteString("wait\n")
	return b.String()
}

// healthCheck runs health_cmd ($2) in setup_path ($1) for at most $3
// seconds (then TERM, and KILL 2 s later) and prints its exit status:
// 124 or 137 when it ran out of time.
const healthCheck = `cd "$1" 2>/dev/null; timeout -k 2 "$3" sh -c "$2" </dev/null >/dev/null 2>&1; echo $?`

// configMD5 prints the md5 of file $1 as the account reads it, "gone" when
// there is no such file, and nothing when the file is there but cannot be
// read (permission denied, a directory, a read error): drift is a file
// whose content differs or that is gone, as repair judges it (repair, as
// the account too, restores a gone file and refuses an unreadable one), so
// a file the account cannot read is never reported as drifted. A path the
// account cannot stat is gone only when the nearest ancestor it can stat
// is a directory it may search: then the lookup itself found nothing.
// md5sum prints "HASH  PATH", with a leading backslash when PATH needs
// escaping.
const configMD5 = `if [ -e "$1" ]; then r=$(md5sum -- "$1") && r=${r#\\} && echo "${r%% *}"; exit; fi
d=$1; while d=$(dirname -- "$d"); [ ! -e "$d" ]; do :; done
[ -d "$d" ] && [ -x "$d" ] && echo gone`

// sudo is the prefix that runs a command as account, or "" when the login
// user is that account.
func (l linuxPlatform) sudo(account string) string {
	if account == "" || account == l.login {
		return ""
	}
	return "sudo -n -u " + transport.ShellQuote(account) + " -- "
}

func (linuxPlatform) parseProbe(out string, n int) (proc.HostInfo, []proc.Sample, error) {
	return ParseProbe(out, n)
}

func (linuxPlatform) alive(s proc.Sample, name string) bool { return proc.Alive(s, name) }

func (linuxPlatform) controlScript(spec proc.Spec, cmd string) string {
	return controlScript(spec.SetupPath, cmd, spec.OpTimeout)
}

func (p linuxPlatform) checkedControlScript(spec proc.Spec, cmd string, wait time.Duration, anyExit bool) string {
	return checkedControlScript(p.controlScript(spec, cmd), p.statusScript(spec, 0, false), wait, anyExit)
}

func (linuxPlatform) signalScript(pid int, startTicks uint64, sig string, wait time.Duration) string {
	return signalScript(pid, startTicks, sig, wait)
}

func (linuxPlatform) defaultCommand(verb string, spec proc.Spec) string {
	return defaultCommand(verb, spec)
}

func (linuxPlatform) whoami() string { return "id -un" }

func (linuxPlatform) whoamiOf(out string) (string, error) {
	u := strings.TrimSpace(out)
	if u == "" || strings.ContainsAny(u, " \t\n") {
		return "", fmt.Errorf("id -un printed %q, not a user name", trim(out))
	}
	return u, nil
}

// accountIsLogin reports whether a Windows spec's account means "the
// WinRM login": none given, or GSE's default root, which Windows lacks.
func accountIsLogin(spec proc.Spec) bool {
	return spec.Account == "" || spec.Account == policies.DefaultAccount
}
