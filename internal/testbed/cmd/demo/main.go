// Command demo shows drover end to end on one machine: a Temporal dev server
// with its UI, three real sshd hosts, a worker, and a GSE status request
// answered for every host. It stops everything it started on the way out.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
	"github.com/drover-sh/drover/workflows"
)

const (
	temporalAddr = "127.0.0.1:7233"
	uiPort       = 8233
	namespace    = "gse"
	procName     = "proc-test"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding worker, starter and temporal")
	dir := flag.String("dir", "demo", "directory for the demo's state")
	hosts := flag.Int("hosts", 3, "number of test-bed hosts")
	once := flag.Bool("once", false, "exit right after printing the results")
	flag.Parse()
	if err := run(*bin, *dir, *hosts, *once); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(bin, dir string, nHosts int, once bool) error {
	bin, _ = filepath.Abs(bin)
	dir, _ = filepath.Abs(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, addr := range []string{temporalAddr, fmt.Sprintf("127.0.0.1:%d", uiPort)} {
		if l, err := net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("%s is in use (another demo or Temporal running?): %w", addr, err)
		} else {
			l.Close()
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	step("starting the Temporal dev server (UI on http://127.0.0.1:%d)", uiPort)
	srv, err := testbed.StartTemporal(testbed.TemporalOptions{
		Binary: filepath.Join(bin, "temporal"), DBFile: filepath.Join(dir, "temporal.db"),
		Address: temporalAddr, UIPort: uiPort, LogFile: filepath.Join(dir, "temporal.log"),
		SearchAttributes: workflows.SearchAttributeTypes,
	})
	if err != nil {
		return err
	}
	defer func() { step("stopping the dev server"); _ = srv.Stop() }()

	step("starting %d sshd hosts", nHosts)
	bed, err := testbed.Start(testbed.Options{Hosts: nHosts, Dir: filepath.Join(dir, "hosts")})
	if err != nil {
		return err
	}
	defer func() { step("stopping the hosts"); _ = bed.Close() }()
	for _, h := range bed.Hosts {
		fmt.Printf("    host %-12s sshd pid %d, /data is %s\n", h.IP, h.Pid(), h.DataDir)
	}

	env := append(os.Environ(), "DROVER_TEMPORAL_ADDRESS="+temporalAddr, "DROVER_INVENTORY="+bed.InventoryPath)
	step("starting the worker (log: %s)", filepath.Join(dir, "worker.log"))
	worker, err := startWorker(filepath.Join(bin, "worker"), env, filepath.Join(dir, "worker.log"))
	if err != nil {
		return err
	}
	defer func() { step("stopping the worker"); stopProcess(worker) }()

	for _, h := range bed.Hosts[:min(2, nHosts)] {
		pid, err := h.StartSample(namespace, procName, "")
		if err != nil {
			return err
		}
		fmt.Printf("    started %s on %s, pid %d\n", procName, h.IP, pid)
	}

	regPath := filepath.Join(dir, "register-request.json")
	reqPath := filepath.Join(dir, "status-request.json")
	if err := writeRequests(regPath, reqPath, bed); err != nil {
		return err
	}
	step("registering %s/%s on every host (register_proc_info): %s", namespace, procName, regPath)
	out, err := starter(ctx, bin, env, "api", "register_proc_info", "-f", regPath)
	if err != nil {
		return err
	}
	fmt.Print(out)
	step("submitting a GSE operate_process status request (op_type 2): %s", reqPath)
	out, err = starter(ctx, bin, env, "api", "operate_process", "-f", reqPath)
	if err != nil {
		return err
	}
	fmt.Print(out)
	var accepted struct {
		Data struct {
			TaskID string `json:"task_id"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &accepted); err != nil || accepted.Data.TaskID == "" {
		return fmt.Errorf("no task id in %q", out)
	}
	task := accepted.Data.TaskID

	step("get_proc_operate_result for %s", task)
	result, err := waitResult(ctx, bin, env, task)
	if err != nil {
		return err
	}
	fmt.Print(result)
	printSummary(result)

	step("the workflow in Temporal")
	list, _ := exec.Command(filepath.Join(bin, "temporal"), "workflow", "list", "--address", temporalAddr,
		"--query", fmt.Sprintf("WorkflowId = '%s'", task)).CombinedOutput()
	fmt.Print(string(list))
	fmt.Printf("\n  UI:        http://127.0.0.1:%d/namespaces/default/workflows/%s\n", uiPort, task)
	fmt.Printf("  CLI:       %s workflow show --address %s --workflow-id '%s'\n", filepath.Join(bin, "temporal"), temporalAddr, task)
	fmt.Printf("  inventory: %s\n", bed.InventoryPath)
	if once {
		return nil
	}
	fmt.Println("\nEverything stays up for exploring. Press Ctrl-C to stop it all.")
	<-ctx.Done()
	return nil
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func startWorker(path string, env []string, logPath string) (*exec.Cmd, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(path)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

func stopProcess(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

func starter(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "starter"), args...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		err = nil // some hosts failed: that is a result, not an error
	}
	if err != nil {
		return string(out), fmt.Errorf("starter %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// waitResult polls get_proc_operate_result the way GSE callers do, until no
// host is still 115.
func waitResult(ctx context.Context, bin string, env []string, task string) (string, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		out, err := starter(ctx, bin, env, "result", task)
		if err != nil {
			return "", err
		}
		if !strings.Contains(out, `"error_code": 115`) {
			return out, nil
		}
		if time.Now().After(deadline) {
			return out, fmt.Errorf("task %s still running after 3 minutes", task)
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// writeRequests writes a register_proc_info request (seed 004's shape) and
// an operate_process status request (seed 000's) for every host.
func writeRequests(regPath, statusPath string, bed *testbed.Bed) error {
	var hosts []map[string]any
	for _, h := range bed.Hosts {
		hosts = append(hosts, map[string]any{"ip": h.IP, "bk_cloud_id": 0, "bk_supplier_id": 0})
	}
	meta := map[string]any{"namespace": namespace, "name": procName, "labels": map[string]string{"proc_name": procName}}
	dir := "/data/" + namespace
	reg := map[string]any{
		"bk_app_code": "demo", "bk_username": "admin", "meta": meta, "hosts": hosts,
		"spec": map[string]any{
			"identity":       map[string]any{"proc_name": procName, "setup_path": dir, "pid_path": dir + "/" + procName + ".pid", "user": "root"},
			"control":        map[string]any{"version_cmd": "echo 1.0.0"},
			"resource":       map[string]any{"cpu": 30.0, "mem": 10.0},
			"monitor_policy": map[string]any{"auto_type": 1, "start_check_secs": 5},
		},
	}
	status := map[string]any{"bk_app_code": "demo", "bk_username": "admin", "meta": meta, "op_type": 2, "hosts": hosts}
	for path, body := range map[string]any{regPath: reg, statusPath: status} {
		b, err := json.MarshalIndent(body, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func printSummary(result string) {
	var r struct {
		Data map[string]struct {
			ErrorCode int    `json:"error_code"`
			ErrorMsg  string `json:"error_msg"`
			Content   string `json:"content"`
		} `json:"data"`
	}
	if json.Unmarshal([]byte(result), &r) != nil {
		return
	}
	fmt.Printf("\n  %-32s %-6s %-8s %-8s %-8s %s\n", "result key", "code", "pid", "cpu%", "mem%", "message")
	keys := make([]string, 0, len(r.Data))
	for k := range r.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := r.Data[k]
		var c struct {
			Process []struct {
				Instance []struct {
					Pid         int     `json:"pid"`
					CPUUsage    float64 `json:"cpuUsage"`
					PhyMemUsage float64 `json:"phyMemUsage"`
				} `json:"instance"`
			} `json:"process"`
		}
		pid, cpu, mem := "-", "-", "-"
		if json.Unmarshal([]byte(v.Content), &c) == nil && len(c.Process) > 0 && len(c.Process[0].Instance) > 0 {
			in := c.Process[0].Instance[0]
			pid = fmt.Sprint(in.Pid)
			cpu = fmt.Sprintf("%.2f", in.CPUUsage)
			mem = fmt.Sprintf("%.4f", in.PhyMemUsage)
		}
		fmt.Printf("  %-32s %-6d %-8s %-8s %-8s %s\n", k, v.ErrorCode, pid, cpu, mem, v.ErrorMsg)
	}
}
