package activities

import (
	"strings"
	"testing"

	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
)

func TestPlanShowsWhatHostOpWouldRun(t *testing.T) {
	ssh := inventory.Host{IP: "10.0.0.1", User: "root", Transport: inventory.TransportSSH}
	hostile := proc.Spec{ProcName: "a;b", SetupPath: "/data/x y", PidPath: "/data/x y/a.pid"}
	withCmds := proc.Spec{ProcName: "svc", SetupPath: "/opt/svc", PidPath: "/run/svc.pid", Account: "app", StartCmd: "./run --daemon"}
	cases := []struct {
		name    string
		op      proc.OpType
		spec    proc.Spec
		want    []string // each a line "what detail"
		runsAs  string
		refused string
	}{
		{"default start quotes path and name", proc.OpStart, hostile,
			[]string{"probe pid file /data/x y/a.pid", "run cd '/data/x y' && ./start.sh 'a;b' &", "check alive 5s after the command"},
			"root (ssh login root, no sudo)", ""},
		{"default stop runs stop.sh", proc.OpStop, hostile,
			[]string{"probe pid file /data/x y/a.pid", "run cd '/data/x y' && ./stop.sh 'a;b' &", "check gone within stop_check 5s"}, "", ""},
		{"own start_cmd as another account goes through sudo", proc.OpStart, withCmds,
			[]string{"probe pid file /run/svc.pid", "run ./run --daemon", "check alive 5s after the command"},
			"app (ssh login root, then sudo -n -u app -- sh -c COMMAND)", ""},
		{"no stop_cmd beside other commands signals the group", proc.OpStop, withCmds,
			[]string{"probe pid file /run/svc.pid", "signal TERM to the process group of the probed pid, KILL after stop_check 5s", "check gone within stop_check 5s"}, "", ""},
		{"no restart_cmd stops then starts", proc.OpRestart, withCmds,
			[]string{"probe pid file /run/svc.pid", "signal TERM to the process group of the probed pid, KILL after stop_check 5s",
				"check gone within stop_check 5s", "run ./run --daemon", "check alive 5s after the command"}, "", ""},
		{"kill without kill_cmd sends KILL", proc.OpKill, withCmds,
			[]string{"probe pid file /run/svc.pid", "signal KILL to the process group of the probed pid", "check gone within stop_check 5s"}, "", ""},
		{"reload without reload_cmd is refused", proc.OpReload, withCmds, nil, "", "process svc has no reload_cmd"},
		{"status only probes", proc.OpStatus, withCmds, []string{"probe pid file /run/svc.pid"}, "", ""},
		{"a bat spec cannot run over ssh", proc.OpStart, proc.Spec{ProcName: "x", ShellExt: proc.ShellBat}, nil, "", `cmd_shell_ext "bat" needs a Windows (winrm) host; 10.0.0.1 is reached over ssh`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Plan(ssh, c.op, c.spec)
			if p.Refused != c.refused {
				t.Fatalf("refused %q, want %q", p.Refused, c.refused)
			}
			var got []string
			for _, s := range p.Steps {
				got = append(got, s.What+" "+s.Detail)
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if c.runsAs != "" && p.RunsAs != c.runsAs {
				t.Fatalf("runs as %q, want %q", p.RunsAs, c.runsAs)
			}
		})
	}
}
