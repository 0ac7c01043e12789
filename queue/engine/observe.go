package engine

import (
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Observer receives what the engine did, for metrics; roles/telemetry implements it with
// Prometheus, so the engine itself knows nothing of metrics. Every call reports work this replica
// committed: counts are per replica, and their sum over the replicas is the total. Methods are
// called on hot paths (after a group commit, not per request) and must be fast and safe for
// concurrent use.
type Observer interface {
	// Submitted: n new jobs became PENDING in queue (a submit; the repeat of an idempotent
	// submit is not new).
	Submitted(queue string, n int)
	// Assigned: n jobs went PENDING→ASSIGNED to a worker (through Redis or straight from Postgres).
	Assigned(queue string, n int)
	// Started: one attempt went ASSIGNED→RUNNING (an ack, or the ack a report implied). wait is
	// started_at − max(created_at, not_before), by the database's clock: how long a due job
	// waited for a worker (submit→start for a first attempt, backoff end→start for a retry).
	Started(queue string, wait time.Duration)
	// Finished: a worker's report moved one attempt RUNNING→DONE or RUNNING→FAILED. processing
	// is the report's time − started_at, by the database's clock (0 for a report that implied
	// its ack).
	Finished(queue string, state queue.State, processing time.Duration)
	// Failed: the reaper failed n attempts of queue (assignment or execution timeout, lost worker).
	Failed(queue string, n int)
	// Requeued: n jobs went back to PENDING (the retry sweep after a backoff, or an operator's
	// retry).
	Requeued(queue string, n int)
	// DeadLettered: n jobs went to DEAD_LETTERED (retries exhausted, permanent failure,
	// cancellation, TTL expiry).
	DeadLettered(queue string, n int)
	// SchedulerCycle: one scheduler cycle took d.
	SchedulerCycle(d time.Duration)
	// ConstraintThrottled: a claim passed over n due jobs the constraint held back.
	ConstraintThrottled(constraint string, n int)
}

// NopObserver ignores everything; the default.
type NopObserver struct{}

func (NopObserver) Submitted(string, int)                       {}
func (NopObserver) Assigned(string, int)                        {}
func (NopObserver) Started(string, time.Duration)               {}
func (NopObserver) Finished(string, queue.State, time.Duration) {}
func (NopObserver) Failed(string, int)                          {}
func (NopObserver) Requeued(string, int)                        {}
func (NopObserver) DeadLettered(string, int)                    {}
func (NopObserver) SchedulerCycle(time.Duration)                {}
func (NopObserver) ConstraintThrottled(string, int)             {}

var _ Observer = NopObserver{}

// observeLeases reports the starts and finishes among the applied outcomes of an ack or report batch.
func (e *Engine) observeLeases(outs []store.LeaseOutcome, reported bool) {
	o := e.opts.Observer
	for _, out := range outs {
		j := out.Job
		if out.Err != nil || j == nil {
			continue
		}
		e.jobChanged(j.ID)
		if out.Started {
			o.Started(j.Queue, waitTime(j))
		}
		if reported && (j.State == queue.StateDone || j.State == queue.StateFailed) {
			o.Finished(j.Queue, j.State, max(j.UpdatedAt.Sub(j.StartedAt), 0))
		}
		if reported {
			e.recordFinished(j)
		}
	}
}

// waitTime is started_at − max(created_at, not_before): a job delayed by run_at or a retry
// backoff waits from the moment it became due.
func waitTime(j *queue.Job) time.Duration {
	due := j.CreatedAt
	if j.NotBefore.After(due) {
		due = j.NotBefore
	}
	return max(j.StartedAt.Sub(due), 0)
}
