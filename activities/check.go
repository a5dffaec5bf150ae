package activities

import (
	"context"
	"slices"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/policies"
	"github.com/drover-sh/drover/proc"
	"github.com/drover-sh/drover/transport"
)

// CheckInput asks whether a host can be reached and run ops: as its login,
// and as each account its registered specs name.
type CheckInput struct {
	Target proc.Target `json:"target"`
	// Accounts are spec accounts as registered (empty is the default);
	// the login itself and repeats are checked once.
	Accounts []string `json:"accounts,omitempty"`
}

// CheckHost checks one host the way ops reach it: connect (117), verify
// the host key (9102), log in (9101) and run a command as the login, then
// the same command as each account through the switch ops use (sudo on
// Linux; 9103 when refused). The whole check is bounded like a status
// probe, so a hung host fails alone.
func (a *Activities) CheckHost(ctx context.Context, in CheckInput) (proc.HostResult, error) {
	host, ok := a.Inventory.Lookup(in.Target.HostID())
	if !ok {
		return proc.Fail(proc.CodeUnknownHost, "host bk_cloud_id=%d ip=%s is not in the inventory", in.Target.CloudID, in.Target.IP), nil
	}
	cctx, cancel := context.WithTimeout(ctx, policies.StatusProbeMax)
	defer cancel()
	c := &hostCheck{a: a, ctx: cctx, host: host, plat: platformFor(host),
		report: proc.CheckReport{Address: host.DialAddress(), Login: host.User}}
	c.report.Accounts = c.accounts(in.Accounts)
	if c.login() {
		for _, acct := range c.report.Accounts {
			c.account(acct)
		}
	}
	if err := attemptLost(ctx); err != nil {
		return proc.HostResult{}, err
	}
	return c.report.Result(), nil
}

// hostCheck is one host's check in progress.
type hostCheck struct {
	a      *Activities
	ctx    context.Context
	host   inventory.Host
	plat   platform
	report proc.CheckReport
}

// accounts are the distinct accounts an op would switch to from the
// login, in the order given.
func (c *hostCheck) accounts(specAccounts []string) []string {
	var out []string
	for _, a := range specAccounts {
		acct := c.plat.account(policies.WithDefaults(proc.Spec{Account: a}))
		if acct == "" || c.plat.ranAs(c.host.User, proc.Spec{Account: acct}) || slices.Contains(out, acct) {
			continue
		}
		out = append(out, acct)
	}
	return out
}

// stages are the connection's checks in the order a failure stops them.
func (c *hostCheck) stages() (reach, key, login string) {
	reach = "reach " + c.host.DialAddress()
	if b := c.host.Bastion; b != nil {
		reach += " via bastion " + b.User + "@" + b.Address
	}
	switch {
	case c.host.Transport != inventory.TransportWinRM:
		key = "host key"
	case c.host.HTTPS && !c.host.Insecure:
		key = "TLS certificate"
	}
	return reach, key, "login as " + c.host.User
}

// login connects, when the transport can ahead of a command, then runs
// the check's command as the login user. It reports whether both worked.
func (c *hostCheck) login() bool {
	reach, key, login := c.stages()
	if conn, ok := c.a.Runner.(transport.Connector); ok {
		if err := conn.Connect(c.ctx, c.host); err != nil {
			c.connectFailed(err, reach, key, login)
			return false
		}
	}
	cmd := c.plat.whoami()
	cmd.Shell = c.plat.shell()
	res, err := c.a.Runner.Run(c.ctx, c.host, cmd)
	if err != nil {
		c.connectFailed(err, reach, key, login)
		return false
	}
	c.pass(reach, key)
	if res.ExitCode != 0 {
		c.fail(login, "", proc.Fail(proc.CodeCommandFailed, "logged in, but a command as %s exited %d: %s", c.host.User, res.ExitCode, trim(string(res.Stderr))))
		return false
	}
	c.pass(login)
	return true
}

// connectFailed records err against the stage it stopped: the stages
// before it passed, the ones after were not tried.
func (c *hostCheck) connectFailed(err error, reach, key, login string) {
	f := transportFailure(err)
	switch transport.KindOf(err) {
	case transport.KindHostKey:
		c.pass(reach)
		c.fail(firstNonEmpty(key, login), "", f)
	case transport.KindUnreachable, 0:
		c.fail(reach, "", f)
	default:
		c.pass(reach, key)
		c.fail(login, "", f)
	}
}

// account runs the check's command as acct, as an op switches to it.
func (c *hostCheck) account(acct string) {
	check := "account " + acct
	spec := proc.Spec{Account: acct}
	cmd := c.plat.whoami()
	cmd.Shell, cmd.Account = c.plat.shell(), acct
	res, err := c.a.Runner.Run(c.ctx, c.host, cmd)
	if err != nil {
		c.fail(check, acct, transportFailure(err))
		return
	}
	if res.ExitCode != 0 {
		c.fail(check, acct, proc.Fail(proc.CodeCommandFailed, "a command as %s exited %d: %s", acct, res.ExitCode, trim(string(res.Stderr))))
		return
	}
	user, err := c.plat.whoamiOf(string(res.Stdout))
	switch {
	case err != nil:
		c.fail(check, acct, proc.Fail(proc.CodeCommandFailed, "a command as %s: %v", acct, err))
	case !c.plat.ranAs(user, spec):
		c.fail(check, acct, proc.Fail(proc.CodeSudoRefused, "a command as account %s ran as %q", acct, user))
	default:
		c.pass(check)
	}
}

func (c *hostCheck) pass(checks ...string) {
	for _, s := range checks {
		if s != "" {
			c.report.Passed = append(c.report.Passed, s)
		}
	}
}

func (c *hostCheck) fail(check, account string, r proc.HostResult) {
	c.report.Failed = append(c.report.Failed, proc.CheckFailure{Check: check, Account: account, Code: r.Code, Message: r.Message})
}
