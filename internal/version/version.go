// Package version says what a drover binary is: its release and commit.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version and Commit are stamped by the Makefile (-ldflags -X). A binary
// built otherwise falls back to what the Go toolchain recorded.
var (
	Version string
	Commit  string
)

// Info is the version, the commit (with "-dirty" for uncommitted changes)
// and the Go release the binary was built with.
type Info struct {
	Version, Commit, Go string
}

// Get reads the stamped values, else the build information.
func Get() Info {
	i := Info{Version: Version, Commit: Commit, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version // go install module@version
		}
		if i.Commit == "" {
			i.Commit = vcsCommit(bi.Settings)
		}
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}

func vcsCommit(settings []debug.BuildSetting) string {
	rev, dirty := "", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}

// String is one line: "drover v0.4.0 (commit 1a2b3c4..., go1.26.8)".
func (i Info) String() string {
	return fmt.Sprintf("drover %s (commit %s, %s)", i.Version, i.Commit, i.Go)
}

// Short is the version and the commit's first 12 characters, for an
// identity string.
func (i Info) Short() string {
	c := i.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	return i.Version + "@" + c
}
