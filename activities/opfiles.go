package activities

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/drover-sh/drover/transport"
)

// opFiles are the files one task op's request keeps on its host, under
// /tmp, where every account may write: each attempt's note of the process
// group of the command it started, the lock taken while a command is
// started and noted (BASE.lock), and the mark a cancel leaves. The scripts
// get base and name the files themselves (scripts/lib_control.sh).
type opFiles struct{ base string }

// opFilesOf names the files of requestID.
func opFilesOf(requestID string) opFiles {
	sum := sha256.Sum256([]byte(requestID))
	return opFiles{base: "/tmp/drover-ctl-" + hex.EncodeToString(sum[:8])}
}

// note is attempt's note of its command's process group.
func (f opFiles) note(attempt int32) string { return fmt.Sprintf("%s-%d.pid", f.base, attempt) }

// cancelled marks the op cancelled: a command started after the cancel
// looked for notes ends itself.
func (f opFiles) cancelled() string { return f.base + ".cancelled" }

// controlPidFile is attempt's note of requestID's command.
func controlPidFile(requestID string, attempt int32) string {
	return opFilesOf(requestID).note(attempt)
}

// endScript marks the op cancelled, then ends the command each of the
// attempts noted, if it still runs (scripts/end.sh).
func endScript(f opFiles, attempts ...int32) transport.Command {
	args := []string{f.base}
	for _, a := range attempts {
		args = append(args, itoa(int64(a)))
	}
	return script("end.sh", args...)
}
