// Command goworker is the Go worker of the conformance suite (package conformance): the executor
// (queue/executor over api/workerconn) with one handler per scenario, chosen by job type, like the
// Python and TypeScript conformance workers. It stops in two phases on SIGTERM and prints its counters
// as one JSON line on exit.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/api/workerconn"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
)

type params struct {
	MS      int     `json:"ms"`
	StepMS  int     `json:"step_ms"`
	Seconds float64 `json:"seconds"`
}

func payload(j *queue.Job) params {
	var p params
	_ = json.Unmarshal(j.Payload, &p) // an empty payload: the defaults
	return p
}

func succeed(ctx context.Context) ([]byte, error) {
	info, _ := queue.JobInfoFromContext(ctx)
	return fmt.Appendf(nil, `{"ok":true,"attempt":%d,"lang":"go"}`, info.Attempt), nil
}

// sleep waits d, cooperatively: a cancelled job (timeout, CancelJob, fence, shutdown) fails.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func handlers() *queue.Mux {
	m := queue.NewMux()
	m.RegisterFunc("succeed", func(ctx context.Context, _ *queue.Job) ([]byte, error) { return succeed(ctx) })
	m.RegisterFunc("noop", func(context.Context, *queue.Job) ([]byte, error) { return nil, nil })
	m.RegisterFunc("fail_once", func(ctx context.Context, j *queue.Job) ([]byte, error) {
		if j.RetryCount == 0 {
			return nil, errors.New("first attempt fails")
		}
		return succeed(ctx)
	})
	m.RegisterFunc("fail_permanent", func(context.Context, *queue.Job) ([]byte, error) {
		return nil, queue.Permanent(errors.New("cannot succeed"))
	})
	m.RegisterFunc("retry_after", func(ctx context.Context, j *queue.Job) ([]byte, error) {
		if j.RetryCount == 0 {
			s := payload(j).Seconds
			if s == 0 {
				s = 2
			}
			return nil, queue.RetryAfter(errors.New("retry later"), time.Duration(s*float64(time.Second)))
		}
		return succeed(ctx)
	})
	m.RegisterFunc("sleep", func(ctx context.Context, j *queue.Job) ([]byte, error) {
		if err := sleep(ctx, time.Duration(payload(j).MS)*time.Millisecond); err != nil {
			return nil, err
		}
		return succeed(ctx)
	})
	m.RegisterFunc("progress", func(ctx context.Context, j *queue.Job) ([]byte, error) {
		step := time.Duration(payload(j).StepMS) * time.Millisecond
		if step == 0 {
			step = 1200 * time.Millisecond
		}
		for _, p := range []int{25, 50, 75} {
			_ = queue.Progress(ctx, p, fmt.Sprintf("step %d", p))
			if err := sleep(ctx, step); err != nil {
				return nil, err
			}
		}
		return succeed(ctx)
	})
	return m
}

type queues []string

func (q *queues) String() string     { return strings.Join(*q, ",") }
func (q *queues) Set(s string) error { *q = append(*q, s); return nil }

func main() {
	var (
		addr        = flag.String("addr", "", "server address")
		workerID    = flag.String("worker-id", "", "worker id")
		concurrency = flag.Int("concurrency", 4, "handlers at once")
		prefetch    = flag.Int("prefetch", 0, "assignments buffered beyond concurrency")
		grace       = flag.Float64("grace", 30, "shutdown grace, seconds")
		qs          queues
	)
	flag.Var(&qs, "queue", "queue to take jobs from (repeatable)")
	flag.Parse()
	if err := run(*addr, *workerID, *concurrency, *prefetch, *grace, qs); err != nil {
		fmt.Fprintln(os.Stderr, "goworker:", err)
		os.Exit(1)
	}
}

func run(addr, workerID string, concurrency, prefetch int, grace float64, qs []string) error {
	cl, err := rpcclient.New(rpcclient.Options{Addr: addr, Token: os.Getenv("JQ_TOKEN")})
	if err != nil {
		return err
	}
	defer cl.Close()
	e, err := executor.New(executor.Options{
		Conn: workerconn.New(cl), Handler: handlers(), WorkerID: workerID, Concurrency: concurrency,
		Prefetch: prefetch, Queues: qs, ShutdownGrace: time.Duration(grace * float64(time.Second)),
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := e.Run(ctx); err != nil {
		return err
	}
	s := e.Stats()
	return json.NewEncoder(os.Stdout).Encode(map[string]int64{
		"received": s.Received, "succeeded": s.Succeeded, "failed": s.Failed, "abandoned": s.Abandoned,
		"fenced": s.Fenced, "reports_rejected": s.ReportsRejected, "reports_settled": s.ReportsSettled,
		"reports_lost": s.ReportsLost,
	})
}
