package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
)

// watchRetry is the pause before a lost watch stream is opened again (a replica restarting).
const watchRetry = 200 * time.Millisecond

// Watch follows one job until it ends and returns its final record: DONE or DEAD_LETTERED (see
// Job.FailureReason). fn, when not nil, is called with the job's record at once and again after
// every change of state or attempt the server sees, and after every progress update of the running
// attempt (Job.Progress: what its handler reported with queue.Progress). It uses the server's WatchJob stream, which
// wakes on the server's own transitions; a stream lost to [ErrUnavailable] (a replica restarting)
// is opened again, and a server without WatchJob is polled instead. It stops when ctx ends, with
// an error wrapping ctx's cause. There is no other deadline: give ctx one to bound the wait.
func (c *Client) Watch(ctx context.Context, id string, fn func(*queue.Job)) (*queue.Job, error) {
	var lastErr error
	var last *queue.Job
	for {
		j, err := c.watchOnce(ctx, id, func(j *queue.Job) {
			if changed(last, j) {
				last = j
				if fn != nil {
					fn(j)
				}
			}
		})
		switch {
		case err == nil && j != nil:
			return j, nil
		case ctx.Err() != nil:
			if lastErr != nil {
				return nil, fmt.Errorf("wait for job %s: %w (last error: %w)", id, context.Cause(ctx), lastErr)
			}
			return nil, fmt.Errorf("wait for job %s: %w", id, context.Cause(ctx))
		case connect.CodeOf(err) == connect.CodeUnimplemented:
			return c.waitPoll(ctx, id, fn)
		case err == nil, errors.Is(err, ErrUnavailable):
			// The stream ended early (the replica stopped): open it again.
			lastErr = err
		default:
			return nil, err
		}
		t := time.NewTimer(watchRetry)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// changed reports whether j differs from last in what Watch's callback hears: state, attempt or
// progress.
func changed(last, j *queue.Job) bool {
	if last == nil || j.State != last.State || j.Attempt != last.Attempt {
		return true
	}
	a, b := last.Progress, j.Progress
	if a == nil || b == nil {
		return a != b
	}
	return a.Percent != b.Percent || a.Message != b.Message || !a.UpdatedAt.Equal(b.UpdatedAt)
}

// watchOnce reads one WatchJob stream; it returns the job once it has ended, or (nil, nil) when
// the stream ended before it did.
func (c *Client) watchOnce(ctx context.Context, id string, fn func(*queue.Job)) (*queue.Job, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.api.Jobs.WatchJob(sctx, connect.NewRequest(&jqv1.WatchJobRequest{JobId: id}))
	if err != nil {
		return nil, watchError(err)
	}
	defer func() { _ = stream.Close() }()
	for stream.Receive() {
		j := api.JobFromProto(stream.Msg().GetJob())
		fn(j)
		if j.State.Terminal() {
			return j, nil
		}
	}
	if err := stream.Err(); err != nil {
		return nil, watchError(err)
	}
	return nil, nil
}

// watchError keeps UNIMPLEMENTED recognisable (connect.CodeOf) for the fallback to polling.
func watchError(err error) error {
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		return err
	}
	return CallError(opGet, err)
}
