package engine

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// The operator's and the workers' commands: every change of a job, queue or worker that does not
// come from the dispatch path goes through one of these. Each decides with queue's rules (the
// transition table first, before anything is written), then writes the decided values with one
// compare-and-set of the store, which records the event in the same statement. A command that
// lost a race (the job moved between the read and the write) decides again on the new state.

// commandTries bounds how often a command re-decides after losing a compare-and-set: only a job
// that keeps moving (dispatched, failed and retried meanwhile) exhausts it.
const commandTries = 4

// JobCancel cancels a job (FR-012, queue.Cancel): PENDING, ASSIGNED and FAILED jobs are
// dead-lettered with reason cancelled; a RUNNING job is marked cancel-requested (its worker is told
// by its next heartbeat; its failure then dead-letters it). The job is returned as it now stands.
// Errors: ErrJobNotFound, ErrInvalidArgument, ErrIllegalTransition (DONE, DEAD_LETTERED).
func (e *Engine) JobCancel(ctx context.Context, id string) (*queue.Job, error) {
	return e.jobCommand(ctx, id, func(j *queue.Job) (*queue.Job, error) {
		d, request, err := queue.Cancel(j.State)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		if request {
			if j.CancelRequested {
				return j, nil
			}
			return e.opts.Store.JobRequestCancel(ctx, store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: j.WorkerID})
		}
		return e.apply(ctx, j, d)
	}, func(j *queue.Job) {
		if j.State == queue.StateDeadLettered {
			e.opts.Observer.DeadLettered(j.Queue, 1)
		}
	})
}

// JobRetry re-enqueues a FAILED or DEAD_LETTERED job, due now, with its retry budget back (FR-013,
// queue.ManualRetry). Errors: ErrJobNotFound, ErrInvalidArgument, ErrIllegalTransition.
func (e *Engine) JobRetry(ctx context.Context, id string) (*queue.Job, error) {
	return e.jobCommand(ctx, id, func(j *queue.Job) (*queue.Job, error) {
		d, err := queue.ManualRetry(j.State, j.TTL, e.now())
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		return e.apply(ctx, j, d)
	}, func(j *queue.Job) {
		e.opts.Observer.Requeued(j.Queue, 1)
		e.JobsReady(j.Queue) // due now: every replica's scheduler looks at once
	})
}

// JobDelete deletes a finished job (DONE or DEAD_LETTERED, queue.Delete) with its result and its
// events — with Kafka on, only those already published: the others are still owed to Kafka and
// go later with retention — and returns it as it was. A job that could still move (PENDING, ASSIGNED,
// RUNNING, FAILED) must be cancelled first. Errors: ErrJobNotFound, ErrInvalidArgument,
// ErrIllegalTransition.
func (e *Engine) JobDelete(ctx context.Context, id string) (*queue.Job, error) {
	return e.jobCommand(ctx, id, func(j *queue.Job) (*queue.Job, error) {
		if err := queue.Delete(j.State); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		if err := e.opts.Store.JobDelete(ctx, store.JobDeleteParams{ID: j.ID, State: j.State,
			Unpublished: e.opts.KafkaOff}); err != nil {
			return nil, err
		}
		return j, nil
	}, func(j *queue.Job) {
		e.log.Info("job deleted", zap.String("job_id", j.ID), zap.String("queue", j.Queue), zap.String("state", string(j.State)))
	})
}

// jobCommand reads the job, lets decide write, and decides again while the write loses its
// compare-and-set; done observes the job as the command left it.
func (e *Engine) jobCommand(ctx context.Context, id string, decide func(*queue.Job) (*queue.Job, error), done func(*queue.Job)) (*queue.Job, error) {
	var lastErr error
	for range commandTries {
		j, err := e.opts.Store.JobGet(ctx, id)
		if err != nil {
			return nil, err
		}
		out, err := decide(j)
		if errors.Is(err, queue.ErrStaleAttempt) {
			lastErr = err
			continue
		}
		if err != nil {
			return nil, err
		}
		e.jobChanged(out.ID)
		done(out)
		return out, nil
	}
	return nil, fmt.Errorf("job %s keeps changing state; try again: %w", id, lastErr)
}

// apply writes a decision about job j with a compare-and-set on the state and attempt it was
// decided on.
func (e *Engine) apply(ctx context.Context, j *queue.Job, d queue.Decision) (*queue.Job, error) {
	return e.opts.Store.JobTransition(ctx, store.JobTransitionParams{
		ID: j.ID, From: d.From, To: d.To, Attempt: j.Attempt, Reason: d.Reason,
		NotBefore: d.NotBefore, ExpiresAt: d.ExpiresAt, ResetRetries: d.ResetRetries,
	})
}

// JobConsumeResult hands out a DONE job's kept result and deletes it in the same step (seed 001's
// fetch-once): taken is false for every caller but the first.
func (e *Engine) JobConsumeResult(ctx context.Context, id string) (j *queue.Job, taken bool, err error) {
	return e.opts.Store.JobConsumeResult(ctx, id)
}

// DeadLettersPurge deletes the dead letters of a queue ("" every queue) and returns how many.
func (e *Engine) DeadLettersPurge(ctx context.Context, p store.JobPurgeDeadLettersParams) (int64, error) {
	n, err := e.opts.Store.JobPurgeDeadLetters(ctx, p)
	if err == nil && n > 0 {
		e.log.Info("dead letters purged", zap.String("queue", p.Queue), zap.Int64("jobs", n))
	}
	return n, err
}

// QueueCreate creates a queue (FR-027); zero fields take the defaults.
func (e *Engine) QueueCreate(ctx context.Context, p store.QueueCreateParams) (*queue.Queue, error) {
	return e.opts.Store.QueueCreate(ctx, p)
}

// QueueSetPaused pauses or resumes a queue's dispatch; resuming wakes the schedulers.
func (e *Engine) QueueSetPaused(ctx context.Context, p store.QueueSetPausedParams) (*queue.Queue, error) {
	q, err := e.opts.Store.QueueSetPaused(ctx, p)
	if err == nil && !q.Paused {
		e.JobsReady(q.Name)
	}
	return q, err
}

// QueueUpdate changes a queue's settings (store.QueueUpdateParams). The settings the stores read at
// use (retries, TTL, backoff, retention, pause) apply from the next submit or failure; the weights
// and max_wait this replica caches for dispatch apply from its next claim, and on the other replicas
// from theirs once this replica's announcement reaches them (within queueSettingsTTL at the latest).
func (e *Engine) QueueUpdate(ctx context.Context, p store.QueueUpdateParams) (*queue.Queue, error) {
	q, err := e.opts.Store.QueueUpdate(ctx, p)
	if err != nil {
		return nil, err
	}
	e.forgetQueueSettings(q.Name)
	e.announceQueueSettings(ctx, q.Name)
	e.log.Info("queue updated", zap.String("queue", q.Name))
	e.WakeScheduler()
	return q, nil
}

// QueueDelete deletes a queue; with Force, its jobs and their events too.
func (e *Engine) QueueDelete(ctx context.Context, p store.QueueDeleteParams) (int64, error) {
	return e.opts.Store.QueueDelete(ctx, p)
}

// WorkerRegister registers a worker, or brings a known one back ONLINE.
func (e *Engine) WorkerRegister(ctx context.Context, p store.WorkerRegisterParams) (*queue.Worker, error) {
	w, err := e.opts.Store.WorkerRegister(ctx, p)
	if err != nil {
		return nil, err
	}
	e.log.Info("worker registered", zap.String("worker_id", w.ID), zap.String("hostname", w.Hostname),
		zap.Int("concurrency", w.Concurrency), zap.Strings("queues", w.Queues), zap.String("version", w.Version))
	return w, nil
}

// HeartbeatAnswer is what a worker's heartbeat is told.
type HeartbeatAnswer struct {
	Worker *queue.Worker
	// Drain and Shutdown are the operator's word for the worker (shutdown wins).
	Drain, Shutdown bool
	// Cancel lists the held jobs the worker must stop: cancelled, or no longer its own.
	Cancel []string
}

// WorkerHeartbeat records a worker's liveness and its circuit breakers, and answers with the
// operator's command and the leases it should stop. A worker declared OFFLINE must register again
// (queue.ErrWorkerLost): its leases were failed.
func (e *Engine) WorkerHeartbeat(ctx context.Context, p store.WorkerHeartbeatParams, held []store.JobLease) (HeartbeatAnswer, error) {
	w, err := e.opts.Store.WorkerHeartbeat(ctx, p)
	if err != nil {
		return HeartbeatAnswer{}, err
	}
	if w.Status == queue.WorkerOffline {
		return HeartbeatAnswer{}, fmt.Errorf("%w: worker %q: its leases are gone", queue.ErrWorkerLost, p.ID)
	}
	// The stream's session, when it is on this replica, honours the breakers at once; elsewhere
	// the next (re)opened stream reads them from the worker's row.
	e.SetBreakers(p.ID, w.Breakers)
	a := HeartbeatAnswer{Worker: w, Shutdown: w.ShutdownRequested, Drain: w.Status == queue.WorkerDraining}
	if len(held) > 0 {
		if a.Cancel, err = e.opts.Store.JobLeasesToCancel(ctx, p.ID, held); err != nil {
			return HeartbeatAnswer{}, err
		}
	}
	return a, nil
}

// WorkerDeregister marks a worker OFFLINE (its row is kept for history).
func (e *Engine) WorkerDeregister(ctx context.Context, id string) error {
	if err := e.opts.Store.WorkerDeregister(ctx, id); err != nil {
		return err
	}
	e.log.Info("worker deregistered", zap.String("worker_id", id))
	return nil
}

// WorkerDrain stops new assignments to a worker (FR-023, queue.Drain); idempotent. Its stream on
// this replica ends at once; one on another replica ends when the worker, told DRAIN by its next
// heartbeat, closes it.
func (e *Engine) WorkerDrain(ctx context.Context, id string) (*queue.Worker, error) {
	var lastErr error
	for range commandTries {
		w, err := e.opts.Store.WorkerGet(ctx, id)
		if err != nil {
			return nil, err
		}
		to, change, err := queue.Drain(w.Status)
		if err != nil {
			return nil, fmt.Errorf("worker %q: %w", id, err)
		}
		if change {
			w, err = e.opts.Store.WorkerSetStatus(ctx, store.WorkerSetStatusParams{ID: id, Status: to})
			if errors.Is(err, queue.ErrIllegalTransition) { // went OFFLINE meanwhile: decide again
				lastErr = err
				continue
			}
			if err != nil {
				return nil, err
			}
		}
		e.EndSession(id, ErrWorkerDraining)
		return w, nil
	}
	return nil, lastErr
}

// WorkerResume puts a drained worker back to work (queue.Resume); idempotent for an ONLINE one.
// The worker hears it from its next heartbeat, which no longer says DRAIN, and opens its
// assignment stream again.
func (e *Engine) WorkerResume(ctx context.Context, id string) (*queue.Worker, error) {
	var lastErr error
	for range commandTries {
		w, err := e.opts.Store.WorkerGet(ctx, id)
		if err != nil {
			return nil, err
		}
		to, change, err := queue.Resume(w)
		if err != nil {
			return nil, err
		}
		if !change {
			return w, nil
		}
		w, err = e.opts.Store.WorkerSetStatus(ctx, store.WorkerSetStatusParams{ID: id, Status: to})
		if errors.Is(err, queue.ErrIllegalTransition) { // went OFFLINE meanwhile: decide again
			lastErr = err
			continue
		}
		if err != nil {
			return nil, err
		}
		e.log.Info("worker resumed", zap.String("worker_id", id))
		return w, nil
	}
	return nil, lastErr
}

// WorkerShutdown asks a worker to drain, deregister and exit (FR-024); idempotent.
func (e *Engine) WorkerShutdown(ctx context.Context, id string) (*queue.Worker, error) {
	w, err := e.opts.Store.WorkerRequestShutdown(ctx, id)
	if err != nil {
		return nil, err
	}
	e.EndSession(w.ID, ErrWorkerDraining)
	return w, nil
}
