package activities

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/drover-sh/drover/transport"
)

// opFiles are the files one task op's request keeps on its host, under
// /tmp, where every account may write: each attempt's note of the process
// group of the command it started, the lock taken while a command is
// started and noted, and the mark a cancel leaves.
type opFiles struct{ base string }

// opFilesOf names the files of requestID.
func opFilesOf(requestID string) opFiles {
	sum := sha256.Sum256([]byte(requestID))
	return opFiles{base: "/tmp/drover-ctl-" + hex.EncodeToString(sum[:8])}
}

// note is attempt's note of its command's process group.
func (f opFiles) note(attempt int32) string { return fmt.Sprintf("%s-%d.pid", f.base, attempt) }

// lock is held while a command is started and noted.
func (f opFiles) lock() string { return f.base + ".lock" }

// cancelled marks the op cancelled: a command started after the cancel
// looked for notes ends itself.
func (f opFiles) cancelled() string { return f.base + ".cancelled" }

// controlPidFile is attempt's note of requestID's command.
func controlPidFile(requestID string, attempt int32) string {
	return opFilesOf(requestID).note(attempt)
}

// endScript marks the op cancelled, then kills the process group each of
// the attempts noted, if the process the note names still runs (its start
// time is the noted one: the pid may have gone to another process since).
// Only a file the account owns is read, so another user cannot name a pid
// for it to kill. Marks a day old go too: a cancelled op is never run
// again, so its mark is needed only while its attempts may still be
// starting.
func endScript(f opFiles, attempts ...int32) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n: > %s 2>/dev/null\n", startOf, transport.ShellQuote(f.cancelled()))
	b.WriteString("find /tmp -maxdepth 1 -name 'drover-ctl-*.cancelled' -mmin +1440 -delete 2>/dev/null\n")
	for _, a := range attempts {
		fmt.Fprintf(&b, `( n=%[1]s
  [ -O "$n" ] || exit 0
  read -r p ps < "$n"; rm -f "$n"
  case "$p" in ''|*[!0-9]*) exit 0;; esac
  [ "$p" -gt 1 ] && [ -n "$ps" ] && [ "$(startof "$p")" = "$ps" ] && kill -KILL -"$p" 2>/dev/null )
`, transport.ShellQuote(f.note(a)))
	}
	b.WriteString("exit 0\n")
	return b.String()
}
