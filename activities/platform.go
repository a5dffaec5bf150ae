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
	// cpu, extras adds version_cmd and health_cmd. known, when set (with
	// extras), is the "PID STARTTICKS" of the incarnation a probe before
	// proved the spec's process: its exe and cmdline are not read again.
	statusScript(spec proc.Spec, window time.Duration, extras bool, host *hostKnown, known string) transport.Command
	// watchScript is one supervision poll of every entry; each health
	// check is bounded by health on its own. known[i], when set, is the
	// "PID STARTTICKS" of entry i's process as the last poll found it
	// alive: a platform may skip what it already knows of it, and of the
	// host, when host is set.
	watchScript(entries []WatchEntry, health time.Duration, known []string, host *hostKnown) transport.Command
	parseProbe(out string, n int) (proc.HostInfo, []proc.Sample, error)
	alive(s proc.Sample, procName string) bool
	// controlScript runs cmd in the spec's setup_path within op_timeout;
	// m and n, which only a Linux host's task op has, mark the op and
	// note the command (see controlScript).
	controlScript(spec proc.Spec, cmd string, m opMark, n *noting) transport.Command
	// checksInControl reports whether a control command and its
	// post-check probe share one exec (checkedControlScript).
	checksInControl() bool
	// signalScript stops the probed incarnation: sig is TERM or KILL; with
	// wait > 0 a TERM is followed by KILL after wait.
	signalScript(m opMark, pid int, startTicks uint64, sig string, wait time.Duration) transport.Command
	defaultCommand(verb string, spec proc.Spec) string
	// whoami prints the user it runs as, as whoamiOf reads it: the host
	// check's command, as cheap as the platform allows.
	whoami() transport.Command
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

func (linuxPlatform) statusScript(spec proc.Spec, window time.Duration, extras bool, host *hostKnown, known string) transport.Command {
	if !extras {
		return probeScript([]string{spec.PidPath}, window, host)
	}
	args := append([]string{seconds(window), spec.PidPath, spec.SetupPath, spec.VersionCmd, spec.HealthCmd}, host.opArgs()...)
	return script("status.sh", append(args, spec.Account, known)...)
}

// watchScript is the one exec of a poll: every pid file, every health_cmd,
// and the md5 of every watched config file (scripts/watch.sh). The poll
// itself runs as the login user; health_cmd and the md5s run as each
// spec's account, as its start and stop do, so they see what the process
// sees.
func (l linuxPlatform) watchScript(entries []WatchEntry, health time.Duration, known []string, host *hostKnown) transport.Command {
	// The check scripts go only to a poll that runs them: a poll is sent
	// every interval to every host.
	healthSh, md5Sh := "", ""
	for _, e := range entries {
		if e.Spec.HealthCmd != "" {
			healthSh = scripts["health.sh"]
		}
		for _, c := range e.Spec.ConfigMap {
			if c.Path != "" && c.MD5 != "" {
				md5Sh = scripts["config_md5.sh"]
			}
		}
	}
	args := []string{healthSh, md5Sh, strconv.FormatFloat(health.Seconds(), 'f', -1, 64)}
	args = append(args, host.args()...)
	args = append(args, strconv.Itoa(len(entries)))
	for i, e := range entries {
		k := ""
		if i < len(known) {
			k = known[i]
		}
		args = append(args, e.Spec.PidPath, k)
	}
	for i, e := range entries {
		account := l.sudoAccount(e.Spec.Account)
		if e.Spec.HealthCmd != "" {
			args = append(args, "health", account, strconv.Itoa(i), e.Spec.SetupPath, e.Spec.HealthCmd)
		}
		for j, c := range e.Spec.ConfigMap {
			if c.Path != "" && c.MD5 != "" {
				args = append(args, "md5", account, strconv.Itoa(i), strconv.Itoa(j), c.Path)
			}
		}
	}
	return bounded(script("watch.sh", args...))
}

// sudoAccount is the account a check runs as through sudo, or "" when
// the login user is that account.
func (l linuxPlatform) sudoAccount(account string) string {
	if account == l.login {
		return ""
	}
	return account
}

func (linuxPlatform) parseProbe(out string, n int) (proc.HostInfo, []proc.Sample, error) {
	return ParseProbe(out, n)
}

func (linuxPlatform) alive(s proc.Sample, name string) bool { return proc.Alive(s, name) }

func (linuxPlatform) controlScript(spec proc.Spec, cmd string, m opMark, n *noting) transport.Command {
	return controlScript(m, spec.SetupPath, cmd, spec.OpTimeout, n)
}

func (linuxPlatform) checksInControl() bool { return true }

func (linuxPlatform) signalScript(m opMark, pid int, startTicks uint64, sig string, wait time.Duration) transport.Command {
	return signalScript(m, pid, startTicks, sig, wait)
}

func (linuxPlatform) defaultCommand(verb string, spec proc.Spec) string {
	return defaultCommand(verb, spec)
}

func (linuxPlatform) whoami() transport.Command { return script("whoami.sh") }

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
