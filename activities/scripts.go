package activities

import (
	"embed"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sh/drover/internal/scriptfile"
	"github.com/drover-sh/drover/transport"
)

// drover's host scripts, one file each under scripts/: sh for Linux hosts,
// ps1 for Windows ones. Their text is fixed; what a command is about
// reaches a script as its arguments (transport.Command.Args). Files named
// lib_* hold functions the others include.
//
//go:embed scripts/*
var scriptFiles embed.FS

// scripts holds every script but the libraries, by file name, as the
// hosts receive them (scriptfile.Load).
var scripts = func() map[string]string {
	m := map[string]string{}
	names, err := fs.Glob(scriptFiles, "scripts/*")
	if err != nil {
		panic(err)
	}
	for _, p := range names {
		if name := path.Base(p); !strings.HasPrefix(name, "lib_") {
			m[name] = scriptfile.MustLoad(scriptFiles, p)
		}
	}
	return m
}()

// script is the command that runs the script file (e.g. "control.sh")
// with args; its Name is the file's, less the extension.
func script(file string, args ...string) transport.Command {
	text, ok := scripts[file]
	if !ok {
		panic("no script " + file)
	}
	return transport.Command{Name: strings.TrimSuffix(file, path.Ext(file)), Script: text, Args: args}
}

// bounded marks c as a script that ends by itself (transport.Command.Bounded):
// one that only reads the host, or runs a command under its own watchdog.
func bounded(c transport.Command) transport.Command {
	c.Bounded = true
	return c
}

// seconds is d as a script argument: seconds with millisecond precision,
// "0" for none.
func seconds(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
}
