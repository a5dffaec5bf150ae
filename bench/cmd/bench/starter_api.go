package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/drover-sh/drover/proc"
)

// apiAnswer is what one `starter api NAME -f BODY --wait` answered: every
// key's code, as a caller reads them.
type apiAnswer struct {
	Began time.Time
	Took  time.Duration
	Keys  int
	// Codes counts the keys by code; Example is one message of each code
	// but success.
	Codes   map[proc.Code]int
	Example map[proc.Code]string
	// Exit is the starter's exit (nil, or its non-zero status when some
	// host failed).
	Exit error
}

// starterAPI runs `bin/starter api NAME -f BODY --wait` against queue with
// inventory, as a caller would. Its error is an answer that could not be
// read; a host's failure is in Codes.
func (e *env) starterAPI(ctx context.Context, name, body, queue, inventory string) (apiAnswer, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.s.bin, "starter"), "api", name, "-f", body, "--wait",
		"--temporal-address", e.cfg.TemporalAddress, "--task-queue", queue, "--inventory", inventory)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	a := apiAnswer{Began: time.Now(), Codes: map[proc.Code]int{}, Example: map[proc.Code]string{}}
	a.Exit = cmd.Run()
	a.Took = time.Since(a.Began)
	var resp struct {
		Data map[string]struct {
			Code    proc.Code `json:"error_code"`
			Message string    `json:"error_msg"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
		return a, fmt.Errorf("starter api %s: %v: output: %v: %s", name, a.Exit, err, tailOf(errOut.String(), 300))
	}
	a.Keys = len(resp.Data)
	for key, r := range resp.Data {
		a.Codes[r.Code]++
		if r.Code != proc.CodeSuccess {
			a.Example[r.Code] = key + ": " + r.Message
		}
	}
	return a, nil
}

// hostList is a request's hosts list of ips, in cloud area 0.
func hostList(ips []string) []map[string]any {
	list := make([]map[string]any, len(ips))
	for i, ip := range ips {
		list[i] = map[string]any{"ip": ip, "bk_cloud_id": 0, "bk_supplier_id": 0}
	}
	return list
}

// operateBody writes operate_process's body: op on process ns/name on ips.
func operateBody(path, ns, name string, op proc.OpType, ips []string) error {
	return writeJSON(path, map[string]any{
		"bk_app_code": "bench", "bk_username": "bench",
		"meta":    map[string]any{"namespace": ns, "name": name, "labels": map[string]string{"proc_name": name}},
		"op_type": int(op), "hosts": hostList(ips),
	})
}

// registerBody writes register_proc_info's body (seed 004): process ns/name
// on ips with spec s.
func registerBody(path, ns, name string, s proc.Spec, ips []string) error {
	return writeJSON(path, map[string]any{
		"bk_app_code": "bench", "bk_username": "bench",
		"meta":  map[string]any{"namespace": ns, "name": name, "labels": map[string]string{"proc_name": name}},
		"hosts": hostList(ips),
		"spec": map[string]any{
			"identity": map[string]any{"proc_name": s.ProcName, "setup_path": s.SetupPath, "pid_path": s.PidPath, "user": "root"},
			"control":  map[string]any{"start_cmd": s.StartCmd, "stop_cmd": s.StopCmd},
			"monitor_policy": map[string]any{"auto_type": 1,
				"start_check_secs": int(s.StartCheck / time.Second), "stop_check_secs": int(s.StopCheck / time.Second)},
		},
	})
}
