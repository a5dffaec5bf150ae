//go:build tools

// Package devserver pins the build of bin/temporal: the temporal CLI v1.5.1
// (its dev server embeds Temporal server v1.29.1) with a newer
// modernc.org/sqlite than the CLI's own. The CLI's v1.34.1 keeps a file
// database's connection after a cancelled query left it interrupted, and
// then fails every query with "interrupted (9)": under a fleet's load the
// whole server stops. Later releases drop such a connection from the pool.
package devserver

import _ "github.com/temporalio/cli/cmd/temporal"
