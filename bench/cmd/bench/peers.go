package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/drover-sh/drover/internal/testbed"
)

// peerSeq numbers the peers' control directories.
var peerSeq int

// peerPair runs a peer twice: cold, with no ssh connection to any host,
// then warm, reusing the ssh master connections the cold run left
// (ControlPersist, which Ansible turns on by default and which is the best
// pssh and pdsh can do). The masters are stopped afterwards.
func (e *env) peerPair(ctx context.Context, tool string, hosts []*testbed.Host) (cold, warm float64, err error) {
	peerSeq++
	dir := filepath.Join(e.dir, fmt.Sprintf("%s-%d", tool, peerSeq))
	if err := os.MkdirAll(filepath.Join(dir, "home"), 0o700); err != nil {
		return 0, 0, err
	}
	defer stopMasters(dir)
	args, env, err := e.peerCommand(tool, dir, hosts, probeScript)
	if err != nil {
		return 0, 0, err
	}
	for _, dst := range []*float64{&cold, &warm} {
		out, errOut, took, err := runPeer(ctx, args, env, dir)
		*dst = took
		if n := countRunning(out); err != nil || n != len(hosts) {
			return 0, 0, fmt.Errorf("%s: %d of %d hosts answered running (%v): %s%s", tool, n, len(hosts), err, tail(string(out)), tail(string(errOut)))
		}
	}
	return cold, warm, nil
}

// runPeer runs a peer's command line, args, in dir with env: its output,
// its error output, and how long it took in seconds.
func runPeer(ctx context.Context, args, env []string, dir string) (stdout, stderr []byte, took float64, err error) {
	began := time.Now()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env, cmd.Dir = env, dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.Bytes(), errOut.Bytes(), time.Since(began).Seconds(), err
}

func tail(s string) string {
	if len(s) > 1500 {
		return "..." + s[len(s)-1500:]
	}
	return s
}

// peerCommand writes the peer's files under dir and returns its command
// line for script and its environment: a clean HOME, no agent, and an ssh config that
// trusts exactly the bed's known_hosts and asks nothing.
func (e *env) peerCommand(tool, dir string, hosts []*testbed.Host, script string) ([]string, []string, error) {
	sshConfig := filepath.Join(dir, "ssh_config")
	conf := strings.Join([]string{
		"Host *",
		"  User root",
		"  IdentityFile " + e.bed.ClientKeyPath,
		"  IdentitiesOnly yes",
		"  PreferredAuthentications publickey",
		"  UserKnownHostsFile " + e.bed.KnownHostsPath,
		"  GlobalKnownHostsFile /dev/null",
		"  StrictHostKeyChecking yes",
		"  HostKeyAlgorithms ssh-ed25519",
		"  UpdateHostKeys no",
		"  CheckHostIP no",
		"  BatchMode yes",
		"  GSSAPIAuthentication no",
		"  ForwardAgent no",
		"  ForwardX11 no",
		"  ConnectTimeout 60",
		"  ServerAliveInterval 0",
		"  LogLevel ERROR",
		"  ControlMaster auto",
		"  ControlPersist 300",
		"  ControlPath " + filepath.Join(dir, "%C"),
		"",
	}, "\n")
	if err := os.WriteFile(sshConfig, []byte(conf), 0o644); err != nil {
		return nil, nil, err
	}
	var ips []string
	for _, h := range hosts {
		ips = append(ips, h.IP)
	}
	hostsFile := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hostsFile, []byte(strings.Join(ips, "\n")+"\n"), 0o644); err != nil {
		return nil, nil, err
	}
	env := []string{"HOME=" + filepath.Join(dir, "home"), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	fan := len(hosts)
	if e.s.fanout > 0 {
		fan = e.s.fanout
	}
	fanout := strconv.Itoa(max(50, fan))
	switch tool {
	case toolPssh:
		return []string{"parallel-ssh", "-h", hostsFile, "-l", "root", "-p", fanout, "-t", "0", "-i", "-x", "-F " + sshConfig, script}, env, nil
	case toolPdsh:
		env = append(env, "PDSH_SSH_ARGS=-F "+sshConfig+" -x -l%u %h")
		return []string{"pdsh", "-R", "ssh", "-f", fanout, "-l", "root", "-w", "^" + hostsFile, script}, env, nil
	case toolAnsible:
		inv := "[bench]\n" + strings.Join(ips, "\n") + "\n\n[all:vars]\nansible_user=root\n"
		if err := os.WriteFile(filepath.Join(dir, "inventory.ini"), []byte(inv), 0o644); err != nil {
			return nil, nil, err
		}
		cfg := fmt.Sprintf(`[defaults]
forks = %d
host_key_checking = True
gathering = explicit
interpreter_python = /usr/bin/python3
retry_files_enabled = False
deprecation_warnings = False
local_tmp = %[2]s/home/.ansible/tmp
[ssh_connection]
pipelining = True
ssh_args = -F %[3]s
`, e.s.forks, dir, sshConfig)
		path := filepath.Join(dir, "ansible.cfg")
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			return nil, nil, err
		}
		env = append(env, "ANSIBLE_CONFIG="+path)
		return []string{"ansible", "all", "-i", filepath.Join(dir, "inventory.ini"), "-m", "shell", "-a", script}, env, nil
	}
	return nil, nil, fmt.Errorf("unknown peer %q", tool)
}

// stopMasters ends the ssh master connections a peer left under dir: the
// bench started them, and their command lines name their control socket.
func stopMasters(dir string) {
	for attempt := 0; attempt < 50; attempt++ {
		pids := mastersUnder(dir)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func mastersUnder(dir string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.HasPrefix(cl, []byte("ssh: "+dir+"/")) {
			pids = append(pids, pid)
		}
	}
	return pids
}
