package transport

import (
	"embed"

	"github.com/drover-sh/drover/internal/scriptfile"
)

// The transport's own sh scripts, one file each under scripts/.
//
//go:embed scripts/*.sh
var scriptFiles embed.FS

var (
	// wrapper runs every SSH command: see scripts/wrapper.sh.
	wrapper = scriptfile.MustLoad(scriptFiles, "scripts/wrapper.sh")
	// killScript kills a cancelled command's process group ($1).
	killScript = scriptfile.MustLoad(scriptFiles, "scripts/kill.sh")
	// sftpServer starts the host's sftp-server as the account it runs as.
	// When the login user is not the account, the SSH subsystem would run
	// as the login user, so the server is started through sudo instead,
	// and files are created, owned and read as the account.
	sftpServer = scriptfile.MustLoad(scriptFiles, "scripts/sftp_server.sh")
)

// scriptArg0 is $0 of every script: `sh -c SCRIPT drover ARG...`.
const scriptArg0 = "drover"

// ShellCommand is cmd as one POSIX sh command line, every word quoted:
// `sh -c SCRIPT drover ARG...`. It is how a host's shell receives a
// command, less the wrapper and sudo the SSH runner adds.
func ShellCommand(cmd Command) string {
	return "sh -c " + ShellQuote(cmd.Script) + " " + scriptArg0 + shellArgs(cmd.Args)
}

// shellArgs is args as sh words, each after a space.
func shellArgs(args []string) string {
	n := 0
	for _, a := range args {
		n += len(a) + 3
	}
	b := make([]byte, 0, n)
	for _, a := range args {
		b = append(b, ' ')
		b = append(b, ShellQuote(a)...)
	}
	return string(b)
}
