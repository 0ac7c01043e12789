package storetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// commandStore is what the engine's job commands use of a store.
type commandStore interface {
	JobGet(ctx context.Context, id string) (*queue.Job, error)
	JobTransition(ctx context.Context, p store.JobTransitionParams) (*queue.Job, error)
	JobRequestCancel(ctx context.Context, l store.JobLease) (*queue.Job, error)
}

// cancelJob and retryJob drive the store's primitives as the engine's cancel and retry commands do
// (queue/engine/commands.go): queue's rule decides on the job as read, one compare-and-set writes
// the decision, and a lost race decides again. The suite checks what the primitives make of that:
// the same outcomes under every interleaving with dispatch, reports and other commands.
func cancelJob(ctx context.Context, s commandStore, id string) (*queue.Job, error) {
	return command(ctx, s, id, func(j *queue.Job) (*queue.Job, error) {
		d, request, err := queue.Cancel(j.State)
		if err != nil {
			return nil, err
		}
		if request {
			if j.CancelRequested {
				return j, nil
			}
			return s.JobRequestCancel(ctx, store.JobLease{ID: j.ID, Attempt: j.Attempt})
		}
		return s.JobTransition(ctx, store.JobTransitionParams{ID: j.ID, From: d.From, To: d.To, Attempt: j.Attempt, Reason: d.Reason})
	})
}

func retryJob(ctx context.Context, s commandStore, id string) (*queue.Job, error) {
	return command(ctx, s, id, func(j *queue.Job) (*queue.Job, error) {
		d, err := queue.ManualRetry(j.State, j.TTL, time.Now())
		if err != nil {
			return nil, err
		}
		return s.JobTransition(ctx, store.JobTransitionParams{ID: j.ID, From: d.From, To: d.To, Attempt: j.Attempt,
			Reason: d.Reason, NotBefore: d.NotBefore, ExpiresAt: d.ExpiresAt, ResetRetries: d.ResetRetries})
	})
}

func command(ctx context.Context, s commandStore, id string, decide func(*queue.Job) (*queue.Job, error)) (*queue.Job, error) {
	var last error
	for range 4 {
		j, err := s.JobGet(ctx, id)
		if err != nil {
			return nil, err
		}
		out, err := decide(j)
		if !errors.Is(err, queue.ErrStaleAttempt) {
			return out, err
		}
		last = err
	}
	return nil, fmt.Errorf("job %s keeps changing state: %w", id, last)
}
