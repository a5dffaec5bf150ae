package policies

import (
	"time"

	"github.com/drover-sh/drover/proc"
)

// FileCleanupTimeout bounds the new session that removes a failed push's
// temporary files after its own session died.
const FileCleanupTimeout = 15 * time.Second

// fileRate is the slowest transfer a push allows for before its deadline:
// 256 KiB/s, a slow WAN link.
const fileRate = 256 << 10

// FileOpDeadline bounds one file op on one host: connecting and checking,
// plus the transfer of total bytes at a slow link's rate, twice (the write,
// and the md5 read back after the rename).
func FileOpDeadline(total int64) time.Duration {
	return time.Minute + 2*time.Duration(total/fileRate)*time.Second
}

// Log tails.
const (
	// LogReadMax is how much of the end of a log `starter logs` reads.
	LogReadMax = 1 << 20
	// LogTailDefault and LogTailMax bound --tail; the default tail is
	// also at most LogTailDefaultBytes.
	LogTailDefault      = 20
	LogTailMax          = 10000
	LogTailDefaultBytes = 2 << 10
	// LogInlineMax bounds a tail that comes back in its result, as the
	// result is encoded in the task's history: a chunk of 500 hosts stays
	// well within a 2 MB payload. A longer tail goes through the content
	// store.
	LogInlineMax = 4 << 10
	// FailureLogLines and FailureLogBytes bound the log tail a failed
	// start or restart attaches to its error_msg.
	FailureLogLines = 20
	FailureLogBytes = 2 << 10
	// FailureLogTimeout bounds reading it: a failed start answers even
	// when its log cannot be read.
	FailureLogTimeout = 10 * time.Second
)

// PushBytes is what a push transfers to each host.
func PushBytes(files []proc.PushFile) int64 {
	var n int64
	for _, f := range files {
		n += f.Content.Size
	}
	return n
}
