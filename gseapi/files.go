package gseapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/drover-sh/drover/proc"
)

// FileJSON is one entry of push_config's files: the content inline, as
// base64, or by the sha256 of content already in the content store.
type FileJSON struct {
	Path    string  `json:"path"`
	Mode    *string `json:"mode"`
	Content *string `json:"content"`
	SHA256  string  `json:"sha256"`
}

// FilesRequest is push_config, repair_config and tail_proc_log.
type FilesRequest struct {
	Caller
	Meta Meta `json:"meta"`
	HostList
	Files []FileJSON `json:"files"`
	Then  string     `json:"then"`
	Tail  *int       `json:"tail"`
	Grep  string     `json:"grep"`
}

// ContentStore keeps pushed contents by digest (filestore.Store).
type ContentStore interface {
	Put(ctx context.Context, r io.Reader, max int64) (proc.FileRef, error)
	Stat(ctx context.Context, sha256 string) (proc.FileRef, error)
}

// MaxPushFiles bounds the files of one push.
const MaxPushFiles = 100

// decodeFiles decodes a file API whose op is op: meta and hosts, then what
// more reads of its own fields. Inline contents are decoded and kept aside
// (never in a workflow input) until StoreFiles puts them in the content
// store.
func decodeFiles(op proc.OpType, more func(*Task, FilesRequest) error) func(*Task, []byte) error {
	return func(t *Task, body []byte) error {
		var r FilesRequest
		if err := decode(body, &r); err != nil {
			return err
		}
		targets, err := metaTargets(r.Meta, r.HostList)
		if err != nil {
			return err
		}
		t.Caller, t.Items, t.uses = r.Caller, metaItems(r.Meta, targets, nil), metaNamespace(r.Meta.Namespace)
		t.Op, t.Files = op, &proc.FileOp{}
		if more == nil {
			return nil
		}
		return more(t, r)
	}
}

// decodeTail reads tail_proc_log's tail and grep.
func decodeTail(t *Task, r FilesRequest) error {
	if r.Tail != nil {
		if *r.Tail < 1 || *r.Tail > 10000 {
			return fieldErr("tail", "must be 1 to 10000 lines, got %d", *r.Tail)
		}
		t.Files.Tail = *r.Tail
	}
	if r.Grep != "" {
		if err := validRegexp(r.Grep); err != nil {
			return fieldErr("grep", "%v", err)
		}
		t.Files.Grep = r.Grep
	}
	return nil
}

func decodePush(t *Task, r FilesRequest) error {
	switch r.Then {
	case "", proc.ThenReload, proc.ThenRestart:
		t.Files.Then = r.Then
	default:
		return fieldErr("then", "must be %q, %q or absent, got %q", proc.ThenReload, proc.ThenRestart, r.Then)
	}
	if len(r.Files) == 0 {
		return fieldErr("files", "is required: at least one file")
	}
	if len(r.Files) > MaxPushFiles {
		return fieldErr("files", "has %d files; at most %d", len(r.Files), MaxPushFiles)
	}
	seen := map[string]bool{}
	t.contents = make([][]byte, len(r.Files))
	for i, f := range r.Files {
		field := indexed("files", i)
		p, err := proc.CheckRemotePath(f.Path)
		if err != nil {
			return fieldErr(field+".path", "%v", err)
		}
		if seen[p] {
			return fieldErr(field+".path", "%s is listed twice", p)
		}
		seen[p] = true
		mode := uint32(0o644)
		if f.Mode != nil {
			m, err := strconv.ParseUint(*f.Mode, 8, 32)
			if err != nil || m > 0o7777 {
				return fieldErr(field+".mode", "must be an octal file mode such as \"0644\", got %q", *f.Mode)
			}
			mode = uint32(m)
		}
		pf := proc.PushFile{Path: p, Mode: mode}
		switch {
		case f.Content != nil && f.SHA256 != "":
			return fieldErr(field, "give content or sha256, not both")
		case f.Content != nil:
			b, err := base64.StdEncoding.DecodeString(*f.Content)
			if err != nil {
				return fieldErr(field+".content", "must be base64: %v", err)
			}
			if int64(len(b)) > proc.MaxFileSize {
				return fieldErr(field+".content", "is %d bytes; the limit is %d", len(b), proc.MaxFileSize)
			}
			t.contents[i] = b
		case f.SHA256 != "":
			if !validSHA256(strings.ToLower(f.SHA256)) {
				return fieldErr(field+".sha256", "must be a sha256 in hex (64 characters), got %q", f.SHA256)
			}
			pf.Content.SHA256 = strings.ToLower(f.SHA256)
		default:
			return fieldErr(field, "needs content (base64) or sha256 (of content in the content store)")
		}
		t.Files.Files = append(t.Files.Files, pf)
	}
	return nil
}

// StoreFiles puts a push's inline contents in the content store and checks
// that every content it names by sha256 is there, so the task's input
// holds only references. It does nothing for other tasks.
func StoreFiles(ctx context.Context, t *Task, s ContentStore) error {
	if t.Files == nil || len(t.Files.Files) == 0 {
		return nil
	}
	if s == nil {
		return fieldErr("files", "this server has no content store (content_store)")
	}
	for i := range t.Files.Files {
		f := &t.Files.Files[i]
		field := indexed("files", i)
		var ref proc.FileRef
		var err error
		if i < len(t.contents) && t.contents[i] != nil {
			ref, err = s.Put(ctx, bytes.NewReader(t.contents[i]), proc.MaxFileSize)
			field += ".content"
		} else {
			ref, err = s.Stat(ctx, f.Content.SHA256)
			field += ".sha256"
		}
		if err != nil {
			return fieldErr(field, "%v", err)
		}
		f.Content = ref
	}
	t.contents = nil
	return nil
}

// filesStore is an Engine that has a content store.
type filesStore interface {
	ContentStore() ContentStore
}

// storeOf is e's content store, nil when it has none.
func storeOf(e Engine) ContentStore {
	if fs, ok := e.(filesStore); ok {
		return fs.ContentStore()
	}
	return nil
}

func validSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

func validRegexp(s string) error {
	_, err := regexp.Compile(s)
	return err
}
