// Command starter submits drover ops and reads their results.
package main

import (
	"os"

	"github.com/drover-sh/drover/internal/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:], os.Stdout, os.Stderr))
}
