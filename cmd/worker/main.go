// Command worker runs drover's workflows and host activities.
package main

import (
	"fmt"
	"os"
	// supervise_timezone may name an IANA zone on a host without a zone
	// database.
	_ "time/tzdata"

	"github.com/drover-sh/drover/internal/cli"
)

func main() {
	if err := cli.NewWorker().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}
