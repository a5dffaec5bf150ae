//go:build unix

package cli

import "syscall"

// openFileLimit is the worker's open-file limit, which the Go runtime has
// already raised to the hard limit; 0 when it cannot be read.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}
