package executor_test

import (
	"context"
	"fmt"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/queue/executor/executortest"
)

// Example embeds a worker. A real program passes
// workerconn.New(client) as Conn; this one runs against the in-memory
// fake server so that it can show the result.
func Example() {
	srv := executortest.NewServer(executortest.Options{})

	mux := queue.NewMux()
	mux.RegisterFunc("greet", func(ctx context.Context, job *queue.Job) ([]byte, error) {
		info, _ := queue.JobInfoFromContext(ctx) // job id and attempt, for idempotency
		return fmt.Appendf(nil, "hello %s (attempt %d)", job.Payload, info.Attempt), nil
	})

	finished := make(chan executor.JobDone, 1)
	e, err := executor.New(executor.Options{
		Conn:        srv,
		Handler:     mux,
		WorkerID:    "example-worker",
		Concurrency: 4,
		Queues:      []string{"default"},
		OnJobDone:   func(d executor.JobDone) { finished <- d },
	})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- e.Run(ctx) }()

	srv.Submit(&queue.Job{ID: "5e0c5a56-1111-4a4a-8b8b-000000000001", Queue: "default", Type: "greet", Payload: []byte("jq")})
	fmt.Println((<-finished).Outcome)

	stop() // as SIGTERM would: finish, flush the reports, deregister
	fmt.Println(<-stopped)
	fmt.Println(string(srv.Reports()[0].Result))
	// Output:
	// succeeded
	// <nil>
	// hello jq (attempt 1)
}
