package gseapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-sh/drover/internal/filestore"
	"github.com/drover-sh/drover/proc"
)

// dirStore is a real content store in a temporary directory.
func dirStore(t *testing.T) filestore.Store {
	t.Helper()
	s, err := filestore.Open(context.Background(), filestore.Location{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return s
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
	ctx := context.Background()
	store := dirStore(t)
	if err := StoreFiles(ctx, task, store); err != nil {
		t.Fatal(err)
	}
	f := task.Files.Files[0]
	if task.Op != proc.OpPushConfig || task.Files.Then != proc.ThenReload || f.Path != "/data/app/app.conf" || f.Mode != 0o640 ||
		f.Content.Size != 9 || task.contents != nil {
		t.Fatalf("task: %+v %+v", task, f)
	}
	r, err := store.Open(ctx, f.Content)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, err := io.ReadAll(r); err != nil || !bytes.Equal(b, []byte("port = 2\n")) {
		t.Fatalf("stored %q %v", b, err)
	}
	// Content named by digest must be in the store.
	task, err = DecodeTask(APIPushConfig, pushBody(`[{"path":"/data/app/app.conf","sha256":"`+strings.Repeat("c", 64)+`"}]`, ""))
	if err != nil {
		t.Fatal(err)
	}
	var fe *FieldError
	if err := StoreFiles(ctx, task, store); !errors.As(err, &fe) || fe.Field != "files[0].sha256" {
		t.Fatalf("unknown digest: %v", err)
	}
}

// storeEngine is a recording engine with a content store.
type storeEngine struct {
	recordingEngine
	store filestore.Store
}

func (e *storeEngine) ContentStore() ContentStore { return e.store }

// An accepted file task answers its task id, as every task does, whether
// over HTTP or from `starter api` without --wait.
func TestFileAPIsAnswerTheirTaskIDWithoutWaiting(t *testing.T) {
	eng := &storeEngine{store: dirStore(t)}
	g := &Gateway{Engine: eng, Apps: []App{{Code: "ops", Secret: "s3cret"}}}
	auth := `{"bk_app_code":"ops","bk_app_secret":"s3cret","bk_username":"alice",`
	hosts := `"meta":{"namespace":"web","name":"svc"},"hosts":[{"ip":"10.0.0.1","bk_cloud_id":0}]`
	for api, body := range map[string]string{
		APIPushConfig:   auth + hosts + `,"files":[{"path":"/data/app/app.conf","content":"cG9ydCA9IDIK"}]}`,
		APIRepairConfig: auth + hosts + `}`,
	} {
		status, resp := serve(t, g, "/api/v2/proc/"+api, body, nil)
		data, _ := resp.Data.(map[string]any)
		if status != http.StatusOK || !resp.Result || data["task_id"] != "GSETASK:20261122000000:000000000001" {
			t.Errorf("%s over HTTP: %d %+v", api, status, resp)
		}
		resp, _ = Call(context.Background(), eng, api, []byte(strings.Replace(body, auth, "{", 1)), false)
		if data, _ := resp.Data.(TaskData); !resp.Result || data.TaskID != "GSETASK:20261122000000:000000000001" {
			t.Errorf("%s called without waiting: %+v", api, resp)
		}
	}
	if len(eng.started) != 4 {
		t.Fatalf("%d tasks started, want 4", len(eng.started))
	}
}
