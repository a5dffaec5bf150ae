package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/go-ntlmssp"
	"github.com/masterzen/winrm"
	"github.com/masterzen/winrm/soap"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/transport/psenc"
)

// WinRMOptions configures the WinRM transport.
type WinRMOptions struct {
	// DialTimeout bounds TCP connect plus TLS handshake. Default 5s.
	DialTimeout time.Duration
	// Receive is the WS-Management OperationTimeout of each output poll:
	// how long the host may hold a Receive open while the command is
	// quiet. Default 20s.
	Receive time.Duration
}

// WinRMStats are cumulative counters, for tests and benchmarks.
type WinRMStats struct {
	ShellsCreated int64 // shells the hosts opened
	ShellsDeleted int64 // Delete requests the hosts acknowledged
	Commands      int64 // commands sent
	Terminated    int64 // commands stopped by a terminate signal at their timeout
}

// WinRM runs bat and ps1 scripts on Windows hosts over WS-Management, with
// no agent on the host. Every command gets its own shell, deleted when the
// command ends whatever happened, so no host is left with open shells
// counting against its quota. It is safe for concurrent use.
type WinRM struct {
	opts WinRMOptions

	mu      sync.Mutex
	clients map[httpKey]*http.Client

	created, deleted, commands, terminated atomic.Int64
}

var _ Runner = (*WinRM)(nil)

// maxCommandLine is cmd.exe's limit: WinRM runs the command line through
// cmd (WINRS_SKIP_CMD_SHELL is FALSE), so a longer one never starts.
const maxCommandLine = 8191

// NewWinRM returns a WinRM runner.
func NewWinRM(opts WinRMOptions) *WinRM {
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.Receive <= 0 {
		opts.Receive = 20 * time.Second
	}
	return &WinRM{opts: opts, clients: map[httpKey]*http.Client{}}
}

// Stats returns the counters so far.
func (w *WinRM) Stats() WinRMStats {
	return WinRMStats{ShellsCreated: w.created.Load(), ShellsDeleted: w.deleted.Load(),
		Commands: w.commands.Load(), Terminated: w.terminated.Load()}
}

// Close drops idle HTTP connections.
func (w *WinRM) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.clients {
		c.CloseIdleConnections()
	}
	w.clients = map[httpKey]*http.Client{}
	return nil
}

// PowerShellCommandLine is how a ps1 script reaches the host: encoded as
// UTF-16LE base64, so no quoting of cmd.exe or PowerShell ever touches it,
// and progress records (which WinRM would send as CLIXML on stderr) off.
// A script too long for that goes as a gzip payload the command expands.
func PowerShellCommandLine(script string) string {
	const cmd = "powershell -NoProfile -NonInteractive -ExecutionPolicy Bypass -EncodedCommand "
	script = "$ProgressPreference = 'SilentlyContinue'\n" + script
	line := cmd + psenc.Encode(script)
	if len(line) > maxCommandLine {
		line = cmd + psenc.Encode(psenc.Compressed(script))
	}
	return line
}

// WindowsCommandLine is the WinRM command line for cmd. A ps1 script with
// a name or arguments runs as a script block given its arguments as
// literals (psenc.Invocation); a bat command line takes no arguments.
func WindowsCommandLine(cmd Command) (string, error) {
	var line string
	switch sh := shellOf(cmd); sh {
	case ShellPowerShell:
		script := cmd.Script
		if cmd.Name != "" || len(cmd.Args) > 0 {
			script = psenc.Invocation(cmd.Name, cmd.Script, cmd.Args)
		}
		line = PowerShellCommandLine(script)
	case ShellCmd:
		if strings.ContainsAny(cmd.Script, "\r\n") {
			return "", errors.New("a bat script here is one cmd.exe command line; it has line breaks")
		}
		if len(cmd.Args) > 0 {
			return "", errors.New("a bat command line takes no arguments")
		}
		line = "cmd /c " + cmd.Script
	default:
		return "", fmt.Errorf("winrm hosts run bat or ps1 scripts, not %s", sh)
	}
	if len(line) > maxCommandLine {
		return "", fmt.Errorf("command line of %d characters exceeds cmd.exe's %d", len(line), maxCommandLine)
	}
	return line, nil
}

// SameWindowsAccount reports whether account names the login user, with or
// without a DOMAIN\ or @domain qualifier; Windows account names are case
// insensitive.
func SameWindowsAccount(account, login string) bool {
	short := func(s string) string {
		if i := strings.LastIndexByte(s, '\\'); i >= 0 {
			s = s[i+1:]
		}
		if i := strings.IndexByte(s, '@'); i >= 0 {
			s = s[:i]
		}
		return strings.ToLower(s)
	}
	return short(account) == short(login)
}

// Run runs cmd on a winrm host. A non-zero exit is a Result, not an error;
// every error is a *Error:
//   - credentials refused (HTTP 401), or none for cmd.Account: KindAuth;
//   - the host's TLS certificate not verified: KindHostKey;
//   - no shell before the deadline, or the host not reachable: KindUnreachable;
//   - the command running past the deadline: KindTimeout, after a
//     terminate signal to the command.
//
// The shell is deleted in every case.
func (w *WinRM) Run(ctx context.Context, host inventory.Host, cmd Command) (Result, error) {
	addr := host.DialAddress()
	fail := func(kind Kind, err error) (Result, error) { return Result{}, &Error{Kind: kind, Host: addr, Err: err} }
	if host.Transport != inventory.TransportWinRM {
		return fail(KindUnsupported, fmt.Errorf("transport %q is not winrm", host.Transport))
	}
	if host.Bastion != nil {
		return fail(KindUnsupported, errors.New("winrm through a bastion is not supported"))
	}
	line, err := WindowsCommandLine(cmd)
	if err != nil {
		return fail(KindUnsupported, err)
	}
	// The WinRM login is the account: there is no sudo to switch to another.
	if cmd.Account != "" && !SameWindowsAccount(cmd.Account, host.User) {
		return fail(KindAuth, fmt.Errorf("no WinRM credentials for account %q: the inventory logs in as %q", cmd.Account, host.User))
	}
	pw, ok := inventory.PasswordFrom(host.PasswordEnv)
	if !ok {
		return fail(KindAuth, fmt.Errorf("no password for %s: environment variable %q is not set", host.User, host.PasswordEnv))
	}
	hc, err := w.httpClient(host)
	if err != nil {
		return fail(KindHostKey, err)
	}
	if cmd.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmd.Timeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return fail(KindTimeout, fmt.Errorf("command not started: %w", err))
	}

	scheme := "http"
	if host.HTTPS {
		scheme = "https"
	}
	p := &wsman{ctx: ctx, http: hc, url: scheme + "://" + addr + "/wsman", user: host.User, password: pw, addr: addr, ca: caName(host)}
	params := winrm.NewParameters("PT"+strconv.Itoa(int(w.opts.Receive/time.Second))+"S", "en-US", 153600)
	params.TransportDecorator = func() winrm.Transporter { return p }
	client, err := winrm.NewClientWithParameters(&winrm.Endpoint{Host: addr, HTTPS: host.HTTPS}, host.User, pw, params)
	if err != nil {
		return fail(KindUnreachable, err)
	}

	shell, err := client.CreateShell()
	if err != nil {
		return Result{}, p.classify(err, "no shell opened; command not started")
	}
	w.created.Add(1)
	defer func() {
		// Delete runs on a context of its own: it must happen after a
		// timeout or cancel too, or the host keeps the shell.
		if shell.Close() == nil {
			w.deleted.Add(1)
		}
	}()
	if err := ctx.Err(); err != nil {
		return Result{}, &Error{Kind: KindTimeout, Host: addr, Err: fmt.Errorf("command not started: %w", err)}
	}

	w.commands.Add(1)
	c, err := shell.Execute(line)
	if err != nil {
		return Result{}, p.classify(err, "command not started")
	}
	stdout, stderr := &capBuffer{max: maxOutput}, &capBuffer{max: maxOutput}
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); _, _ = io.Copy(stdout, c.Stdout) }()
	go func() { defer copies.Done(); _, _ = io.Copy(stderr, c.Stderr) }()
	// The library's output loop ends when the command is done or a Receive
	// fails, which it does at once when ctx ends; either way it closes the
	// output pipes, so the copies end too.
	c.Wait()
	copies.Wait()
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: c.ExitCode()}
	if p.done.Load() {
		// Releases the finished command on the host before its shell goes.
		_ = c.Close()
		return res, nil
	}
	res.ExitCode = -1
	if ctx.Err() != nil {
		why := fmt.Errorf("command stopped: %w", context.Cause(ctx))
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && cmd.Timeout > 0 {
			why = fmt.Errorf("command ran past its %v timeout: %w", cmd.Timeout, ctx.Err())
		}
		if err := c.Close(); err != nil {
			return res, &Error{Kind: KindTimeout, Host: addr, Err: fmt.Errorf("%w; terminate signal not confirmed: %v", why, err)}
		}
		w.terminated.Add(1)
		return res, &Error{Kind: KindTimeout, Host: addr, Err: fmt.Errorf("%w; remote command terminated", why)}
	}
	_ = c.Close()
	return res, p.classify(p.lastErr(), "connection lost mid-command; the command may have run")
}

func caName(h inventory.Host) string {
	if h.CAFile != "" {
		return "ca_file " + h.CAFile
	}
	return "the system roots"
}

// httpKey names a reusable HTTP client: connections are kept alive per
// endpoint and TLS settings, never across different trust settings.
type httpKey struct {
	addr     string
	https    bool
	insecure bool
	caFile   string
	auth     string
}

func (w *WinRM) httpClient(h inventory.Host) (*http.Client, error) {
	k := httpKey{addr: h.DialAddress(), https: h.HTTPS, insecure: h.Insecure, caFile: h.CAFile, auth: h.Auth}
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.clients[k]; ok {
		return c, nil
	}
	// InsecureSkipVerify only when the inventory says insecure: true.
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: h.Insecure}
	if h.CAFile != "" {
		pem, err := os.ReadFile(h.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificate in it", h.CAFile)
		}
		tlsConf.RootCAs = pool
	}
	var rt http.RoundTripper = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: w.opts.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: w.opts.DialTimeout,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
	}
	if h.Auth == inventory.AuthNTLM {
		// The negotiator takes the credentials from the Basic header and
		// answers the host's NTLM challenge instead.
		rt = ntlmssp.Negotiator{RoundTripper: rt}
	}
	c := &http.Client{Transport: rt}
	w.clients[k] = c
	return c, nil
}

// wsman posts one command's WS-Management messages. It replaces the
// library's HTTP layer so that requests follow the command's context,
// failures come back classified, and cleanup (Signal, Delete) still goes
// out after the context has ended.
type wsman struct {
	ctx                 context.Context
	http                *http.Client
	url, user, password string
	addr, ca            string

	done atomic.Bool // a Receive reported the command Done
	mu   sync.Mutex
	last error
}

// cleanupTimeout bounds each Signal and Delete sent after a command, and
// the Create of a shell: a Create the caller gave up on mid-request may
// still have made a shell on the host, and only a Create that finishes
// names the shell to delete.
const cleanupTimeout = 3 * time.Second

const (
	actionCreate = "http://schemas.xmlsoap.org/ws/2004/09/transfer/Create"
	actionSignal = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/Signal"
	actionDelete = "http://schemas.xmlsoap.org/ws/2004/09/transfer/Delete"
	stateDone    = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/CommandState/Done"
)

func (p *wsman) Transport(*winrm.Endpoint) error { return nil }

func (p *wsman) Post(_ *winrm.Client, m *soap.SoapMessage) (string, error) {
	body := m.String()
	ctx := p.ctx
	if strings.Contains(body, actionCreate) || strings.Contains(body, actionSignal) || strings.Contains(body, actionDelete) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(p.ctx), cleanupTimeout)
		defer cancel()
	}
	out, err := p.post(ctx, body)
	if err != nil {
		p.mu.Lock()
		p.last = err
		p.mu.Unlock()
	} else if strings.Contains(out, stateDone) {
		p.done.Store(true)
	}
	return out, err
}

func (p *wsman) lastErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		return errors.New("command output ended without an exit status")
	}
	return p.last
}

var faultText = regexp.MustCompile(`(?s)<(?:\w+:)?(?:Text|Message)[^>]*>([^<]+)<`)

func (p *wsman) post(ctx context.Context, body string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, strings.NewReader(body))
	if err != nil {
		return "", &Error{Kind: KindUnsupported, Host: p.addr, Err: err}
	}
	req.Header.Set("Content-Type", "application/soap+xml;charset=UTF-8")
	req.SetBasicAuth(p.user, p.password)
	resp, err := p.http.Do(req)
	if err != nil {
		var verify *tls.CertificateVerificationError
		var unknown x509.UnknownAuthorityError
		var hostname x509.HostnameError
		var invalid x509.CertificateInvalidError
		switch {
		case ctx.Err() != nil:
			return "", fmt.Errorf("no answer before the deadline: %w", ctx.Err())
		case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
			return "", &Error{Kind: KindHostKey, Host: p.addr, Err: fmt.Errorf("TLS certificate not verified against %s; refusing to send credentials: %w", p.ca, err)}
		}
		return "", &Error{Kind: KindUnreachable, Host: p.addr, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("no answer before the deadline: %w", ctx.Err())
		}
		return "", &Error{Kind: KindUnreachable, Host: p.addr, Err: fmt.Errorf("read response: %w", err)}
	}
	text := string(data)
	switch {
	case resp.StatusCode == http.StatusOK:
		return text, nil
	case resp.StatusCode == http.StatusUnauthorized:
		return "", &Error{Kind: KindAuth, Host: p.addr, Err: fmt.Errorf("WinRM refused the credentials of %s (HTTP 401)", p.user)}
	case strings.Contains(text, "w:TimedOut") || strings.Contains(text, "2150858793"):
		// A Receive that saw no output within its OperationTimeout: the
		// library polls again when the error says so.
		return "", errors.New("OperationTimeout: no output yet")
	}
	msg := resp.Status
	if m := faultText.FindStringSubmatch(text); m != nil {
		msg += ": " + strings.TrimSpace(m[1])
	}
	return "", &Error{Kind: KindUnreachable, Host: p.addr, Err: fmt.Errorf("WS-Management fault: %s", msg)}
}

// classify turns a failure before or during a command into a *Error.
func (p *wsman) classify(err error, what string) error {
	var te *Error
	if errors.As(err, &te) {
		return &Error{Kind: te.Kind, Host: te.Host, Err: fmt.Errorf("%s: %w", what, te.Err)}
	}
	if p.ctx.Err() != nil {
		return &Error{Kind: KindUnreachable, Host: p.addr, Err: fmt.Errorf("host did not answer before the deadline; %s: %w", what, p.ctx.Err())}
	}
	return &Error{Kind: KindUnreachable, Host: p.addr, Err: fmt.Errorf("%s: %w", what, err)}
}
