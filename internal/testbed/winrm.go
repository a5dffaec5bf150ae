package testbed

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"html"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// WinHost is a WinRM protocol test double: a Go server that speaks real
// WS-Management (Create shell, Command, Receive, Signal, Delete) over HTTP
// or HTTPS on its own 127.0.0.x, with basic authentication, so drover's
// WinRM transport and github.com/masterzen/winrm run against it unchanged.
//
// Behind the protocol it emulates a Windows host (see winhost.go): a
// process table, files, `cmd /c` lines and drover's own PowerShell
// scripts, recognised by their marker and parameters. It cannot prove how
// real PowerShell or cmd.exe behave: the bodies of drover's scripts are
// never run, only their parameters are read.
type WinHost struct {
	IP       string
	Port     int
	HTTPS    bool
	User     string
	Password string
	// CAFile is the PEM of the CA that signed the host's certificate
	// (https only).
	CAFile string
	Dir    string

	lock *os.File
	srv  *http.Server

	ntlm bool

	mu         sync.Mutex
	shells     map[string]*winShell
	challenges map[[8]byte]time.Time // NTLM server challenges not yet answered
	seq        int
	stats      WinStats
	hang       bool
	slowCreate time.Duration
	emu        *windows
	closeErr   error
	closed     bool
}

// WinStats counts what the double was asked to do.
type WinStats struct {
	ShellsCreated int
	ShellsDeleted int
	Commands      int
	Signals       int
	AuthFailures  int // requests with credentials that were refused
	NTLMLogons    int // requests authenticated by NTLM
}

type winShell struct {
	id   string
	cmds map[string]*winCmd
}

// winCmd is one command: its output so far and whether it ended.
type winCmd struct {
	id             string
	stdout, stderr bytes.Buffer
	done           bool
	code           int
	cancel         chan struct{} // closed by Signal or Delete
	changed        chan struct{} // closed and replaced on each change
}

// WinOptions configures NewWinHost.
type WinOptions struct {
	HTTPS    bool
	User     string // default Administrator
	Password string // default a fixed test password
	Dir      string // where the CA file goes; default a temp dir
	// NTLM makes the host offer and accept NTLM (HTTP Negotiate) besides
	// basic, as a domain-joined Windows host does.
	NTLM bool
}

// NewWinHost starts a double for a test and stops it when the test ends.
func NewWinHost(t testing.TB, opts WinOptions) *WinHost {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	h, err := StartWinHost(opts)
	if err != nil {
		t.Fatalf("winrm double: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("winrm double close: %v", err)
		}
	})
	return h
}

// StartWinHost claims a loopback address and serves WS-Management on it,
// at 5985 (http) or 5986 (https).
func StartWinHost(opts WinOptions) (*WinHost, error) {
	if opts.User == "" {
		opts.User = "Administrator"
	}
	if opts.Password == "" {
		opts.Password = "Drover-Test-1"
	}
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return nil, err
	}
	h := &WinHost{HTTPS: opts.HTTPS, User: opts.User, Password: opts.Password, Dir: opts.Dir, ntlm: opts.NTLM,
		shells: map[string]*winShell{}, challenges: map[[8]byte]time.Time{}, emu: newWindows(opts.User)}
	h.Port = 5985
	if opts.HTTPS {
		h.Port = 5986
	}
	next := firstAddr
	var ln net.Listener
	for {
		ip, lock, err := claimAddress(&next)
		if err != nil {
			return nil, err
		}
		l, err := net.Listen("tcp4", net.JoinHostPort(ip, strconv.Itoa(h.Port)))
		if err != nil {
			lock.Close()
			continue
		}
		h.IP, h.lock, ln = ip, lock, l
		break
	}
	h.srv = &http.Server{Handler: http.HandlerFunc(h.serve), ReadHeaderTimeout: 10 * time.Second,
		// Refused TLS handshakes are what some tests are about: not noise.
		ErrorLog: log.New(io.Discard, "", 0)}
	if opts.HTTPS {
		cert, caPEM, err := selfSignedChain(h.IP)
		if err != nil {
			ln.Close()
			h.lock.Close()
			return nil, err
		}
		h.CAFile = filepath.Join(opts.Dir, "winrm-ca-"+h.IP+".pem")
		if err := os.WriteFile(h.CAFile, caPEM, 0o644); err != nil {
			ln.Close()
			h.lock.Close()
			return nil, err
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

// Addr is the host's ip:port.
func (h *WinHost) Addr() string { return net.JoinHostPort(h.IP, strconv.Itoa(h.Port)) }

// Close stops serving and releases the address.
func (h *WinHost) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return h.closeErr
	}
	h.closed = true
	for _, s := range h.shells {
		for _, c := range s.cmds {
			c.stop()
		}
	}
	h.mu.Unlock()
	err := h.srv.Close()
	if h.lock != nil {
		_ = h.lock.Close()
	}
	h.closeErr = err
	return err
}

// Stats returns the counters so far.
func (h *WinHost) Stats() WinStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stats
}

// OpenShells is how many shells were created and not deleted.
func (h *WinHost) OpenShells() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.shells)
}

// SlowCreate makes each Create answer d after the shell exists, as a busy
// host does: a client that gives up meanwhile has left a shell behind.
func (h *WinHost) SlowCreate(d time.Duration) {
	h.mu.Lock()
	h.slowCreate = d
	h.mu.Unlock()
}

// Hang makes every command from now on run until it is signalled, as on a
// host whose commands stall; the protocol itself keeps answering.
func (h *WinHost) Hang(on bool) {
	h.mu.Lock()
	h.hang = on
	h.mu.Unlock()
}

func (c *winCmd) stop() {
	select {
	case <-c.cancel:
	default:
		close(c.cancel)
	}
}

// notify wakes Receives waiting on c; the caller holds the host's lock.
func (c *winCmd) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

var (
	reAction   = regexp.MustCompile(`<(?:\w+:)?Action[^>]*>([^<]+)</`)
	reShellID  = regexp.MustCompile(`<(?:\w+:)?Selector Name="ShellId">([^<]+)</`)
	reCommand  = regexp.MustCompile(`(?s)<(?:\w+:)?Command>(?:<!\[CDATA\[)?(.*?)(?:\]\]>)?</(?:\w+:)?Command>`)
	reArgument = regexp.MustCompile(`(?s)<(?:\w+:)?Arguments>(?:<!\[CDATA\[)?(.*?)(?:\]\]>)?</(?:\w+:)?Arguments>`)
	reCmdID    = regexp.MustCompile(`CommandId="([^"]+)"`)
	reTimeout  = regexp.MustCompile(`<(?:\w+:)?OperationTimeout>PT([0-9.]+)S<`)
)

// receiveHold caps how long the double holds a quiet Receive before the
// TimedOut fault, below any OperationTimeout the client sends, so tests
// are not slowed by long polls.
const receiveHold = 2 * time.Second

func (h *WinHost) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/wsman" {
		http.NotFound(w, r)
		return
	}
	if !h.authenticated(w, r) {
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	body := string(data)
	m := reAction.FindStringSubmatch(body)
	if m == nil {
		h.fault(w, "s:Sender", "w:InvalidMessageInformation", "no Action header")
		return
	}
	switch action := m[1]; {
	case strings.HasSuffix(action, "/transfer/Create"):
		h.create(w)
	case strings.HasSuffix(action, "/shell/Command"):
		h.command(w, body)
	case strings.HasSuffix(action, "/shell/Receive"):
		h.receive(w, r, body)
	case strings.HasSuffix(action, "/shell/Signal"):
		h.signal(w, body)
	case strings.HasSuffix(action, "/transfer/Delete"):
		h.delete(w, body)
	default:
		h.fault(w, "s:Sender", "w:ActionNotSupported", "action "+action+" is not supported by the test double")
	}
}

// authenticated checks the request's credentials: basic, or an NTLM
// handshake when the host speaks it. When not authenticated, the 401 (or
// the NTLM challenge) has been written.
func (h *WinHost) authenticated(w http.ResponseWriter, r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	scheme, data, _ := strings.Cut(auth, " ")
	switch {
	case auth == "":
		h.refuse(w, false) // a client asking what the host offers
		return false
	case scheme == "Basic":
		if user, pw, ok := r.BasicAuth(); ok && user == h.User && pw == h.Password {
			return true
		}
	case h.ntlm && (scheme == "Negotiate" || scheme == "NTLM"):
		return h.ntlmAuth(w, scheme, data)
	}
	h.refuse(w, true)
	return false
}

// refuse answers 401 with the schemes the host offers; failed says
// credentials were given and refused.
func (h *WinHost) refuse(w http.ResponseWriter, failed bool) {
	if failed {
		h.mu.Lock()
		h.stats.AuthFailures++
		h.mu.Unlock()
	}
	if h.ntlm {
		w.Header().Add("WWW-Authenticate", "Negotiate")
	}
	w.Header().Add("WWW-Authenticate", `Basic realm="WSMAN"`)
	w.WriteHeader(http.StatusUnauthorized)
}

const envelopeOpen = `<s:Envelope xml:lang="en-US" xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:a="http://schemas.xmlsoap.org/ws/2004/08/addressing" xmlns:x="http://schemas.xmlsoap.org/ws/2004/09/transfer" xmlns:w="http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd" xmlns:rsp="http://schemas.microsoft.com/wbem/wsman/1/windows/shell"><s:Header><a:Action>%s</a:Action></s:Header><s:Body>`

func reply(w http.ResponseWriter, action, body string) {
	w.Header().Set("Content-Type", "application/soap+xml;charset=UTF-8")
	fmt.Fprintf(w, envelopeOpen, action)
	io.WriteString(w, body)
	io.WriteString(w, `</s:Body></s:Envelope>`)
}

// fault answers as WinRM does: HTTP 500 with a SOAP fault.
func (h *WinHost) fault(w http.ResponseWriter, code, sub, text string) {
	w.Header().Set("Content-Type", "application/soap+xml;charset=UTF-8")
	w.WriteHeader(http.StatusInternalServerError)
	fmt.Fprintf(w, envelopeOpen, "http://schemas.dmtf.org/wbem/wsman/1/wsman/fault")
	fmt.Fprintf(w, `<s:Fault><s:Code><s:Value>%s</s:Value><s:Subcode><s:Value>%s</s:Value></s:Subcode></s:Code><s:Reason><s:Text xml:lang="en-US">%s</s:Text></s:Reason></s:Fault></s:Body></s:Envelope>`,
		code, sub, html.EscapeString(text))
}

func (h *WinHost) create(w http.ResponseWriter) {
	h.mu.Lock()
	h.seq++
	id := fmt.Sprintf("SHELL-%08d", h.seq)
	h.shells[id] = &winShell{id: id, cmds: map[string]*winCmd{}}
	h.stats.ShellsCreated++
	slow := h.slowCreate
	h.mu.Unlock()
	time.Sleep(slow)
	reply(w, "http://schemas.xmlsoap.org/ws/2004/09/transfer/CreateResponse",
		`<x:ResourceCreated><a:ReferenceParameters><w:SelectorSet><w:Selector Name="ShellId">`+id+
			`</w:Selector></w:SelectorSet></a:ReferenceParameters></x:ResourceCreated><rsp:Shell><rsp:ShellId>`+id+`</rsp:ShellId></rsp:Shell>`)
}

// lookup finds the shell a request names; the caller holds the lock.
func (h *WinHost) lookup(body string) *winShell {
	m := reShellID.FindStringSubmatch(body)
	if m == nil {
		return nil
	}
	return h.shells[m[1]]
}

func (h *WinHost) command(w http.ResponseWriter, body string) {
	m := reCommand.FindStringSubmatch(body)
	h.mu.Lock()
	s := h.lookup(body)
	if s == nil || m == nil {
		h.mu.Unlock()
		h.fault(w, "s:Sender", "w:InvalidSelectors", "unknown shell or no command")
		return
	}
	line := html.UnescapeString(m[1])
	for _, a := range reArgument.FindAllStringSubmatch(body, -1) {
		line += " " + html.UnescapeString(a[1])
	}
	h.seq++
	c := &winCmd{id: fmt.Sprintf("CMD-%08d", h.seq), cancel: make(chan struct{}), changed: make(chan struct{})}
	s.cmds[c.id] = c
	h.stats.Commands++
	hang := h.hang
	h.mu.Unlock()

	go func() {
		var out, errOut string
		code := 0
		if hang {
			<-c.cancel
			code = 1
		} else {
			out, errOut, code = h.emu.run(line, c.cancel)
		}
		h.mu.Lock()
		c.stdout.WriteString(out)
		c.stderr.WriteString(errOut)
		c.done, c.code = true, code
		c.notify()
		h.mu.Unlock()
	}()
	reply(w, "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/CommandResponse",
		`<rsp:CommandResponse><rsp:CommandId>`+c.id+`</rsp:CommandId></rsp:CommandResponse>`)
}

func (h *WinHost) receive(w http.ResponseWriter, r *http.Request, body string) {
	hold := receiveHold
	if m := reTimeout.FindStringSubmatch(body); m != nil {
		if secs, err := strconv.ParseFloat(m[1], 64); err == nil && time.Duration(secs*float64(time.Second)) < hold {
			hold = time.Duration(secs * float64(time.Second))
		}
	}
	deadline := time.NewTimer(hold)
	defer deadline.Stop()
	for {
		_, c := h.lockCommand(w, body)
		if c == nil {
			return
		}
		if c.stdout.Len() > 0 || c.stderr.Len() > 0 || c.done {
			var b strings.Builder
			for _, st := range []struct {
				name string
				buf  *bytes.Buffer
			}{{"stdout", &c.stdout}, {"stderr", &c.stderr}} {
				if st.buf.Len() > 0 {
					fmt.Fprintf(&b, `<rsp:Stream Name="%s" CommandId="%s">%s</rsp:Stream>`, st.name, c.id, base64.StdEncoding.EncodeToString(st.buf.Bytes()))
					st.buf.Reset()
				}
			}
			state := "Running"
			exit := ""
			if c.done {
				state = "Done"
				exit = "<rsp:ExitCode>" + strconv.Itoa(c.code) + "</rsp:ExitCode>"
			}
			fmt.Fprintf(&b, `<rsp:CommandState CommandId="%s" State="http://schemas.microsoft.com/wbem/wsman/1/windows/shell/CommandState/%s">%s</rsp:CommandState>`, c.id, state, exit)
			h.mu.Unlock()
			reply(w, "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/ReceiveResponse", "<rsp:ReceiveResponse>"+b.String()+"</rsp:ReceiveResponse>")
			return
		}
		changed := c.changed
		h.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			h.fault(w, "s:Receiver", "w:TimedOut", "The WS-Management service cannot complete the operation within the time specified in OperationTimeout.")
			return
		case <-r.Context().Done():
			return
		}
	}
}

// lockCommand locks h.mu and finds the shell and command a Receive or
// Signal names. When either is unknown it unlocks, answers the fault, and
// the command is nil; else the caller unlocks.
func (h *WinHost) lockCommand(w http.ResponseWriter, body string) (*winShell, *winCmd) {
	h.mu.Lock()
	s := h.lookup(body)
	var c *winCmd
	if m := reCmdID.FindStringSubmatch(body); s != nil && m != nil {
		c = s.cmds[m[1]]
	}
	if c == nil {
		h.mu.Unlock()
		h.fault(w, "s:Sender", "w:InvalidSelectors", "unknown shell or command")
	}
	return s, c
}

func (h *WinHost) signal(w http.ResponseWriter, body string) {
	s, c := h.lockCommand(w, body)
	if c == nil {
		return
	}
	h.stats.Signals++
	c.stop()
	delete(s.cmds, c.id)
	h.mu.Unlock()
	reply(w, "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/SignalResponse", "<rsp:SignalResponse/>")
}

func (h *WinHost) delete(w http.ResponseWriter, body string) {
	h.mu.Lock()
	s := h.lookup(body)
	if s == nil {
		h.mu.Unlock()
		h.fault(w, "s:Sender", "w:InvalidSelectors", "unknown shell")
		return
	}
	// Deleting a shell ends whatever still runs in it, as on Windows.
	for _, c := range s.cmds {
		c.stop()
	}
	delete(h.shells, s.id)
	h.stats.ShellsDeleted++
	h.mu.Unlock()
	reply(w, "http://schemas.xmlsoap.org/ws/2004/09/transfer/DeleteResponse", "")
}

// selfSignedChain makes a CA and a server certificate for ip signed by it.
func selfSignedChain(ip string) (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "drover test WinRM CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP(ip)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caPEM, nil
}

// WriteOtherCA writes a CA that signed nothing this host serves, for tests
// of a host presenting a certificate the inventory's CA does not vouch for.
func WriteOtherCA(path string) error {
	_, caPEM, err := selfSignedChain("127.0.0.1")
	if err != nil {
		return err
	}
	if len(caPEM) == 0 {
		return errors.New("no CA generated")
	}
	return os.WriteFile(path, caPEM, 0o644)
}
