// Command typed-worker is a jq worker whose handler takes typed arguments: queue.HandlerOf decodes
// each job's JSON payload into a GreetArgs (strictly: a payload that does not fit dead-letters the
// job at once) and encodes the handler's GreetResult as the job's result. It runs until SIGINT or
// SIGTERM, then stops gracefully.
//
//	go run ./examples/typed-worker --server-addr localhost:50051 --queues default
//
// and from Go, client.SubmitArgs(ctx, c, "default", "greet", GreetArgs{Name: "Ada"}), or:
//
//	go run ./examples/submit-and-wait --type greet --payload '{"name": "Ada"}'
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jq-dev/jq/api/workerconn"
	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
)

// GreetArgs are the arguments of a "greet" job.
type GreetArgs struct {
	Name  string `json:"name"`
	Shout bool   `json:"shout,omitempty"`
}

// GreetResult is its result.
type GreetResult struct {
	Greeting string `json:"greeting"`
}

// Greet handles "greet" jobs. A missing name is a permanent failure: no retry can add one.
func Greet(_ context.Context, _ *queue.Job, args GreetArgs) (GreetResult, error) {
	if args.Name == "" {
		return GreetResult{}, queue.Permanent(fmt.Errorf("greet: name is required"))
	}
	g := "hello, " + args.Name
	if args.Shout {
		g = strings.ToUpper(g) + "!"
	}
	return GreetResult{Greeting: g}, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "typed-worker: %v\n", err)
		os.Exit(1)
	}
}

// run works until ctx ends.
func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("typed-worker", flag.ContinueOnError)
	var (
		addr        = fs.String("server-addr", "localhost:50051", "jq server API address")
		queues      = fs.String("queues", "default", "comma-separated queues to take jobs from")
		concurrency = fs.Int("concurrency", 4, "most jobs run at once")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := client.New(client.Options{Addr: *addr, Token: os.Getenv("JQ_TOKEN")})
	if err != nil {
		return err
	}
	defer c.Close()

	mux := queue.NewMux()
	mux.Register("greet", queue.HandlerOf(Greet))

	exec, err := executor.New(executor.Options{
		Conn:        workerconn.New(c.API()),
		Handler:     mux,
		Version:     "typed-worker-example",
		Concurrency: *concurrency,
		Queues:      strings.Split(*queues, ","),
	})
	if err != nil {
		return err
	}
	return exec.Run(ctx)
}
