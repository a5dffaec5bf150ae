//go:build !unix

package cli

// openFileLimit is unknown here; the pool takes its floor.
func openFileLimit() uint64 { return 0 }
