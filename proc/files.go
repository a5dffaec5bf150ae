package proc

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// File ops: drover's own numbers, like the registry ops. They act only
// when a request carries a FileOp; an op_type of this value sent through
// a GSE API without one is answered 832 like any unknown op_type.
const (
	OpPushConfig   OpType = 110 // write config files, record their md5
	OpRepairConfig OpType = 111 // restore drifted config files from their source
	OpLogs         OpType = 112 // read the tail of log_path
)

var fileOpNames = map[OpType]string{OpPushConfig: "config_push", OpRepairConfig: "config_repair", OpLogs: "logs"}

// IsFileOp reports whether the op moves files rather than running commands.
func (o OpType) IsFileOp() bool { _, ok := fileOpNames[o]; return ok }

// MaxFileSize bounds one pushed file. A larger one is refused before any
// byte is sent.
const MaxFileSize = 64 << 20

// FileRef names content in the content store by its digest. The content
// itself never enters a workflow: only this reference does.
type FileRef struct {
	SHA256 string `json:"sha256"`
	MD5    string `json:"md5"`
	Size   int64  `json:"size"`
}

// PushFile is one file to write on every host of a push.
type PushFile struct {
	Path    string  `json:"path"`
	Mode    uint32  `json:"mode"`
	Content FileRef `json:"content"`
}

// Then values: what a push runs once its files are in place.
const (
	ThenReload  = "reload"
	ThenRestart = "restart"
)

// FileOp is what a file op needs beyond its items; it is the same for every
// host of a task, so it never grows with the fleet.
type FileOp struct {
	Files []PushFile `json:"files,omitempty"`
	// Then is ThenReload, ThenRestart or empty (push only).
	Then string `json:"then,omitempty"`
	// Tail and Grep select the log lines of OpLogs.
	Tail int    `json:"tail,omitempty"`
	Grep string `json:"grep,omitempty"`
}

// ThenOp is the op a push runs afterwards, if any.
func (f FileOp) ThenOp() (OpType, bool) {
	switch f.Then {
	case ThenReload:
		return OpReload, true
	case ThenRestart:
		return OpRestart, true
	}
	return 0, false
}

// LogContent is the content of an OpLogs result: where the tail was read
// and the tail itself (Text), or, for one too long to carry, its reference
// in the content store (Tail).
type LogContent struct {
	Path      string   `json:"path"`
	Lines     int      `json:"lines"`
	Truncated bool     `json:"truncated,omitempty"`
	Text      string   `json:"text,omitempty"`
	Tail      *FileRef `json:"tail,omitempty"`
}

// CheckRemotePath is the rule for a path a file op writes or reads: absolute,
// no ".." component, no control character; it returns the path cleaned
// (doubled and trailing slashes, "." components removed). The file is then
// written only in path.Dir of the result, the directory the request names.
func CheckRemotePath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("is required")
	case !strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("must be an absolute path, got %q", p)
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "", fmt.Errorf("must not contain control characters")
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("must not contain a '..' component (%q)", p)
		}
	}
	c := path.Clean(p)
	if c == "/" {
		return "", fmt.Errorf("names the root directory, not a file")
	}
	return c, nil
}

// SetConfigFile records a pushed file in a configmap: its md5 becomes the
// one drift is checked against, and its content the source repair restores.
func SetConfigFile(cm []ConfigFile, f PushFile) []ConfigFile {
	src := f.Content
	// A copy: the caller's slice may be shared (a watch armed with the
	// registry as it was compares against it), and must keep what it had.
	cm = slices.Clone(cm)
	for i := range cm {
		if cm[i].Path == f.Path {
			cm[i].MD5, cm[i].Source, cm[i].Mode = f.Content.MD5, &src, f.Mode
			return cm
		}
	}
	return append(cm, ConfigFile{Path: f.Path, MD5: f.Content.MD5, Source: &src, Mode: f.Mode})
}
