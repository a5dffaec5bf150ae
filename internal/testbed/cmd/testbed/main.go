// Command testbed keeps a set of sshd test hosts up for demos and manual runs:
//
//	testbed up --hosts N --dir DIR
//
// It prints the absolute path of the inventory file it wrote, alone on
// stdout, then stays up until SIGINT or SIGTERM and stops its hosts.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/drover-sh/drover/internal/testbed"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("testbed: ")
	if len(os.Args) < 2 || os.Args[1] != "up" {
		fmt.Fprintln(os.Stderr, "usage: testbed up [--hosts N] [--dir DIR]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	hosts := fs.Int("hosts", 3, "number of sshd hosts")
	dir := fs.String("dir", "", "directory for keys, inventory and host files (default: a new temporary directory, removed on exit)")
	_ = fs.Parse(os.Args[2:])

	// Ask for the signals before starting, so one arriving during start-up
	// still leads to a clean stop.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)

	bed, err := testbed.Start(testbed.Options{Hosts: *hosts, Dir: *dir})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("%d hosts up (%s .. %s), dir %s", len(bed.Hosts), bed.Hosts[0].IP, bed.Hosts[len(bed.Hosts)-1].IP, bed.Dir)
	fmt.Println(bed.InventoryPath)

	s := <-sig
	log.Printf("%s: stopping hosts", s)
	if err := bed.Close(); err != nil {
		log.Fatal(err)
	}
}
