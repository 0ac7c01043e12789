// Command submit-and-wait submits one job with the Go client, waits until it finishes and prints
// its result on stdout.
//
// Run it next to a server and a worker that handles the type (for example `jq --role=all`, whose
// built-in worker runs "noop" jobs, or examples/typed-worker for "greet"):
//
//	go run ./examples/submit-and-wait --server-addr localhost:50051 --type greet --payload '{"name": "Ada"}'
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/queue"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "submit-and-wait: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("submit-and-wait", flag.ContinueOnError)
	var (
		addr    = fs.String("server-addr", "localhost:50051", "jq server API address")
		queueN  = fs.String("queue", "default", "queue to submit to")
		typ     = fs.String("type", "noop", "job type (handler name)")
		payload = fs.String("payload", "{}", "JSON payload")
		timeout = fs.Duration("timeout", time.Minute, "how long to wait for the job")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}

	c, err := client.New(client.Options{Addr: *addr, Token: os.Getenv("JQ_TOKEN")})
	if err != nil {
		return err
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	sub, err := c.Submit(ctx, client.Job{Queue: *queueN, Type: *typ, Payload: json.RawMessage(*payload)},
		client.KeepResult(), client.MaxRetries(2))
	switch {
	case errors.Is(err, queue.ErrQueueNotFound):
		return fmt.Errorf("create the queue first (jq --role=admin queue create %s): %w", *queueN, err)
	case err != nil:
		return err
	}

	job, err := c.Wait(ctx, sub.ID)
	if err != nil {
		return err
	}
	if job.State != queue.StateDone {
		return fmt.Errorf("job %s is %s: %s (%s)", job.ID, job.State, job.LastError, job.FailureReason)
	}
	_, err = fmt.Fprintf(stdout, "%s\n", job.Result)
	return err
}
