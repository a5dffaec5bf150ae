package gseapi

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/drover-sh/drover/proc"
)

// memStore is a content store in memory.
type memStore map[string][]byte

func (m memStore) Put(r io.Reader, _ int64) (proc.FileRef, error) {
	b, _ := io.ReadAll(r)
	sum := strings.Repeat("a", 64)
	m[sum] = b
	return proc.FileRef{SHA256: sum, MD5: strings.Repeat("b", 32), Size: int64(len(b))}, nil
}

func (m memStore) Stat(sum string) (proc.FileRef, error) {
	b, ok := m[sum]
	if !ok {
		return proc.FileRef{}, errors.New("no such content")
	}
	return proc.FileRef{SHA256: sum, Size: int64(len(b))}, nil
}

func pushBody(files string, extra string) []byte {
	return []byte(`{"meta":{"namespace":"web","name":"svc"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0}],"files":` + files + extra + `}`)
}

func TestPushConfigRefusesBadInput(t *testing.T) {
	for _, c := range []struct{ name, body, field string }{
		{"relative path", `[{"path":"app.conf","content":"eA=="}]`, "files[0].path"},
		{"dot-dot escape", `[{"path":"/data/app/../../etc/passwd","content":"eA=="}]`, "files[0].path"},
		{"no content", `[{"path":"/data/app/app.conf"}]`, "files[0]"},
		{"both", `[{"path":"/data/app/app.conf","content":"eA==","sha256":"` + strings.Repeat("a", 64) + `"}]`, "files[0]"},
		{"bad base64", `[{"path":"/data/app/app.conf","content":"%%%"}]`, "files[0].content"},
		{"bad mode", `[{"path":"/data/app/app.conf","content":"eA==","mode":"0999"}]`, "files[0].mode"},
		{"twice", `[{"path":"/data/app/a","content":"eA=="},{"path":"/data/app//a","content":"eA=="}]`, "files[1].path"},
		{"none", `[]`, "files"},
		{"then", `[{"path":"/data/app/a","content":"eA=="}],"then":"stop"`, "then"},
	} {
		_, err := DecodeTask(APIPushConfig, pushBody(c.body, ""))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: got %v, want an error on %s", c.name, err, c.field)
		}
	}
}

func TestPushConfigStoresContentsAndKeepsOnlyReferences(t *testing.T) {
	task, err := DecodeTask(APIPushConfig, pushBody(`[{"path":"/data/app//app.conf","content":"cG9ydCA9IDIK","mode":"640"}]`, `,"then":"reload"`))
	if err != nil {
		t.Fatal(err)
	}
	store := memStore{}
	if err := StoreFiles(task, store); err != nil {
		t.Fatal(err)
	}
	f := task.Files.Files[0]
	if task.Op != proc.OpPushConfig || task.Files.Then != proc.ThenReload || f.Path != "/data/app/app.conf" || f.Mode != 0o640 ||
		!bytes.Equal(store[f.Content.SHA256], []byte("port = 2\n")) || task.contents != nil {
		t.Fatalf("task: %+v %+v", task, f)
	}
	// Content named by digest must be in the store.
	task, err = DecodeTask(APIPushConfig, pushBody(`[{"path":"/data/app/app.conf","sha256":"`+strings.Repeat("c", 64)+`"}]`, ""))
	if err != nil {
		t.Fatal(err)
	}
	var fe *FieldError
	if err := StoreFiles(task, store); !errors.As(err, &fe) || fe.Field != "files[0].sha256" {
		t.Fatalf("unknown digest: %v", err)
	}
}
