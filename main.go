// Command jq is a distributed job queue in one executable; --role selects the
// server, a worker, the producer, the operator CLI (admin) or all of them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/jq-dev/jq/roles"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := roles.Main(ctx, os.Args[1:], os.Environ(), roles.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
