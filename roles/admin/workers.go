package admin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/internal/term"
)

// Run lists the workers: id, host, status, concurrency, running jobs, queues,
// version, last heartbeat, and the circuit breakers that are not closed.
func (c *WorkerListCmd) Run(re *runEnv) error {
	// Every page: the server answers at most 1000 workers at a time.
	resp := &jqv1.ListWorkersResponse{}
	for token := ""; ; {
		page, err := call(re, jqv1connect.WorkerServiceClient.ListWorkers, &jqv1.ListWorkersRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			return err
		}
		resp.Workers = append(resp.Workers, page.GetWorkers()...)
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	return re.printMessage(resp, func(w io.Writer) error { return re.workersTable(w, resp.GetWorkers()) })
}

func (re *runEnv) workersTable(w io.Writer, workers []*jqv1.Worker) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "ID\tHOST\t%s\tCONCURRENCY\tRUNNING\tQUEUES\tTYPES\tVERSION\tLAST HEARTBEAT\tBREAKERS\n", re.header("STATUS"))
	for _, wk := range workers {
		types := "*" // registered none: every type
		if len(wk.GetTypes()) > 0 {
			types = cell(strings.Join(wk.GetTypes(), ","))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", cell(wk.GetId()), dash(wk.GetHostname()), re.workerStatus(wk.GetStatus()),
			wk.GetConcurrency(), wk.GetRunningJobs(), dash(strings.Join(wk.GetQueues(), ",")), types, dash(wk.GetVersion()),
			re.when(wk.GetLastHeartbeatAt()), breakersCell(wk))
	}
	return tw.Flush()
}

// breakersCell lists a live worker's open and half-open circuit breakers:
// "payments:open(62%/40),mail:half-open" ("-": all closed; an OFFLINE
// worker's last report is history, not shown).
func breakersCell(wk *jqv1.Worker) string {
	if wk.GetStatus() == jqv1.WorkerStatus_WORKER_STATUS_OFFLINE {
		return "-"
	}
	var parts []string
	for _, b := range wk.GetBreakers() {
		switch b.GetState() {
		case jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_OPEN:
			parts = append(parts, fmt.Sprintf("%s:open(%.0f%%/%d)", b.GetQueue(), 100*b.GetFailureRate(), b.GetSamples()))
		case jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_HALF_OPEN:
			parts = append(parts, b.GetQueue()+":half-open")
		}
	}
	return dash(strings.Join(parts, ","))
}

// Run drains a worker (FR-023).
func (c *WorkerDrainCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.WorkerServiceClient.DrainWorker, &jqv1.DrainWorkerRequest{WorkerId: c.ID})
	if err != nil {
		return failed(named(err, "worker", c.ID), "cannot drain worker %q", c.ID)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		wk := resp.GetWorker()
		_, err := fmt.Fprintf(w, "worker %s is %s: it finishes its %d running jobs and takes no new ones\n",
			cell(wk.GetId()), re.workerStatus(wk.GetStatus()), wk.GetRunningJobs())
		return err
	})
}

// Run puts a drained worker back to work.
func (c *WorkerResumeCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.WorkerServiceClient.ResumeWorker, &jqv1.ResumeWorkerRequest{WorkerId: c.ID})
	if err != nil {
		return failed(named(err, "worker", c.ID), "cannot resume worker %q", c.ID)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		wk := resp.GetWorker()
		_, err := fmt.Fprintf(w, "worker %s is %s: it takes new jobs again\n", cell(wk.GetId()), re.workerStatus(wk.GetStatus()))
		return err
	})
}

// Run asks a worker to drain, deregister and exit (FR-024).
func (c *WorkerShutdownCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.WorkerServiceClient.ShutdownWorker, &jqv1.ShutdownWorkerRequest{WorkerId: c.ID})
	if err != nil {
		return failed(named(err, "worker", c.ID), "cannot shut down worker %q", c.ID)
	}
	if c.Wait {
		return waitWorkerGone(re, c.ID, c.WaitTimeout)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		wk := resp.GetWorker()
		_, err := fmt.Fprintf(w, "worker %s is %s: it finishes its %d running jobs, deregisters and exits\n",
			cell(wk.GetId()), re.workerStatus(wk.GetStatus()), wk.GetRunningJobs())
		return err
	})
}

// workerPoll is how often `worker shutdown --wait` reads the worker list: the API has no worker
// event stream.
const workerPoll = 250 * time.Millisecond

// waitWorkerGone polls the worker until it is OFFLINE (deregistered) or no longer listed, then
// prints its last record.
func waitWorkerGone(re *runEnv, id string, limit time.Duration) error {
	ctx, cancel := re.ctx, context.CancelFunc(func() {})
	if limit > 0 {
		ctx, cancel = context.WithTimeout(re.ctx, limit)
	}
	defer cancel()
	live := term.IsTerminal(re.Stderr)
	start := re.now()
	t := time.NewTicker(workerPoll)
	defer t.Stop()
	var last *jqv1.Worker
	for {
		resp, err := call(re, jqv1connect.WorkerServiceClient.ListWorkers, &jqv1.ListWorkersRequest{})
		if err != nil {
			return err
		}
		i := slices.IndexFunc(resp.GetWorkers(), func(w *jqv1.Worker) bool { return w.GetId() == id })
		if i < 0 || resp.GetWorkers()[i].GetStatus() == jqv1.WorkerStatus_WORKER_STATUS_OFFLINE {
			if live {
				fmt.Fprint(re.Stderr, "\r\x1b[K")
			}
			_, err := fmt.Fprintf(re.Stdout, "worker %s is OFFLINE: it finished its jobs and deregistered\n", cell(id))
			return err
		}
		last = resp.GetWorkers()[i]
		if live {
			fmt.Fprintf(re.Stderr, "\r\x1b[Kworker %s: %s, %d running, %s", cell(id), stateWord(last.GetStatus()),
				last.GetRunningJobs(), re.now().Sub(start).Truncate(time.Second))
		}
		select {
		case <-ctx.Done():
			if live {
				fmt.Fprint(re.Stderr, "\r\x1b[K")
			}
			if re.ctx.Err() == nil {
				return fmt.Errorf("worker %s is still %s with %d running jobs after %v (--wait-timeout)",
					id, stateWord(last.GetStatus()), last.GetRunningJobs(), limit)
			}
			return re.ctx.Err()
		case <-t.C:
		}
	}
}

func stateWord(s jqv1.WorkerStatus) string {
	return strings.TrimPrefix(s.String(), "WORKER_STATUS_")
}
