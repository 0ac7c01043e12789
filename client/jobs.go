package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
)

// Get returns the record of one job, with its retained result and, while it is ASSIGNED or
// RUNNING, the progress its handler last reported (Job.Progress; nil when none). Errors: [queue.ErrJobNotFound],
// [queue.ErrInvalidArgument] (id is not a UUID), and the errors every call may return.
func (c *Client) Get(ctx context.Context, id string) (*queue.Job, error) {
	resp, err := c.api.Jobs.GetJob(ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: id}))
	if err != nil {
		return nil, CallError(opGet, err)
	}
	return api.JobFromProto(resp.Msg.GetJob()), nil
}

// Polling interval of waitPoll: it starts short, for jobs that finish at once, and doubles up to
// waitPollMax.
const (
	waitPollMin = 50 * time.Millisecond
	waitPollMax = time.Second
)

// Wait returns the job once it has reached a terminal state: DONE, or DEAD_LETTERED (failed for
// good, expired or cancelled: see Job.FailureReason). Check job.State; a dead-lettered job is not
// an error of Wait. It is [Client.Watch] without a callback: it follows the server's WatchJob
// stream (polling GetJob only against a server without it), keeps going through
// [ErrUnavailable] (a replica restarting), and stops when ctx ends, with an error wrapping ctx's
// cause.
func (c *Client) Wait(ctx context.Context, id string) (*queue.Job, error) {
	return c.Watch(ctx, id, nil)
}

// waitPoll is Watch by polling GetJob, every 50 ms at first and at most every second, for a
// server that has no WatchJob.
func (c *Client) waitPoll(ctx context.Context, id string, fn func(*queue.Job)) (*queue.Job, error) {
	interval := waitPollMin
	timer := time.NewTimer(0)
	defer timer.Stop()
	var lastErr error
	var last *queue.Job
	for {
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return nil, fmt.Errorf("wait for job %s: %w (last error: %w)", id, context.Cause(ctx), lastErr)
			}
			return nil, fmt.Errorf("wait for job %s: %w", id, context.Cause(ctx))
		case <-timer.C:
		}
		j, err := c.Get(ctx, id)
		switch {
		case err == nil:
			lastErr = nil
			if fn != nil && changed(last, j) {
				fn(j)
			}
			last = j
			if j.State.Terminal() {
				return j, nil
			}
		case errors.Is(err, ErrUnavailable) && ctx.Err() == nil:
			lastErr = err
		case ctx.Err() != nil:
			continue // reported above with the cause
		default:
			return nil, err
		}
		timer.Reset(interval)
		interval = min(2*interval, waitPollMax)
	}
}

// Result types of [JobResult] (seed 001).
const (
	ResultSuccess = api.ResultSuccess
	ResultFailure = api.ResultFailure
)

// JobResult is the outcome of a job, in seed 001's shape: Type [ResultSuccess] with Data, or
// [ResultFailure] with Reason, ShouldRetry, Error and Message.
type JobResult struct {
	Type       string      // ResultSuccess or ResultFailure
	State      queue.State // the job's state when it was read
	FinishedAt time.Time   // when the outcome happened: completion, or the failed attempt's end

	// Success.
	Data     []byte // the handler's result bytes exactly as reported (never nil on success)
	Checksum string // lowercase hex SHA-256 of Data, computed by the server
	Runtime  time.Duration

	// Failure.
	Reason      string          // the job's failure_reason: "error", "timeout", "worker_lost", ...
	ShouldRetry bool            // the server is going to retry the job on its own
	Error       json.RawMessage // the last error as JSON: its own JSON when the text was JSON, else a string; "null" when none
	Message     string          // one line for display
}

// Result fetches the outcome of a job. found is false, without an error, when there is none: the
// job has not finished yet, or it is DONE but kept no result (submitted without [KeepResult]), its
// result was consumed, or its queue's result retention (24 h by default) passed. A FAILED or
// DEAD_LETTERED job answers a [ResultFailure]. With consume a success is deleted as it is returned,
// so exactly one caller gets it; a failure stays.
func (c *Client) Result(ctx context.Context, id string, consume bool) (res *JobResult, found bool, err error) {
	resp, err := c.api.Jobs.GetJobResult(ctx, connect.NewRequest(&jqv1.GetJobResultRequest{JobId: id, Consume: consume}))
	if err != nil {
		return nil, false, CallError(opResult, err)
	}
	if !resp.Msg.GetFound() {
		return nil, false, nil
	}
	r := resp.Msg.GetResult()
	state, ok := api.StateFromProto(resp.Msg.GetState())
	if !ok {
		state = queue.State(resp.Msg.GetState().String())
	}
	res = &JobResult{
		Type:        r.GetType(),
		State:       state,
		FinishedAt:  r.GetFinishedAt().AsTime(),
		Data:        r.GetData(),
		Checksum:    r.GetChecksumSha256(),
		Runtime:     r.GetRuntime().AsDuration(),
		Reason:      r.GetReason(),
		ShouldRetry: r.GetShouldRetry(),
		Message:     r.GetMessage(),
	}
	if res.Type == ResultSuccess && res.Data == nil {
		res.Data = []byte{} // the wire drops empty bytes
	}
	if r.GetError() != nil {
		if res.Error, err = r.GetError().MarshalJSON(); err != nil {
			return nil, false, fmt.Errorf("result of job %s: %w", id, err)
		}
	}
	return res, true, nil
}

// Cancel cancels a job. A PENDING, ASSIGNED or FAILED job is dead-lettered at once (reason
// "cancelled"); for a RUNNING job its worker is asked to stop it, and the returned job is still
// RUNNING with CancelRequested set (Wait tells how it ended). Cancelling a finished job is an error
// wrapping [queue.ErrIllegalTransition].
func (c *Client) Cancel(ctx context.Context, id string) (*queue.Job, error) {
	resp, err := c.api.Jobs.CancelJob(ctx, connect.NewRequest(&jqv1.CancelJobRequest{JobId: id}))
	if err != nil {
		return nil, CallError(opCancel, err)
	}
	j := api.JobFromProto(resp.Msg.GetJob())
	if j != nil {
		j.CancelRequested = resp.Msg.GetCancelRequested()
	}
	return j, nil
}

// Retry re-enqueues a FAILED or DEAD_LETTERED job as PENDING, due at once, with its retry count
// reset; it keeps its id. A job in any other state is an error wrapping
// [queue.ErrIllegalTransition].
func (c *Client) Retry(ctx context.Context, id string) (*queue.Job, error) {
	resp, err := c.api.Jobs.RetryJob(ctx, connect.NewRequest(&jqv1.RetryJobRequest{JobId: id}))
	if err != nil {
		return nil, CallError(opRetry, err)
	}
	return api.JobFromProto(resp.Msg.GetJob()), nil
}

// Delete permanently deletes a finished job (DONE or DEAD_LETTERED) with its result and its
// events, and returns it as it was (without payload and result). Deleting a job in any other state
// is an error wrapping [queue.ErrIllegalTransition]: cancel it first. It needs the admin role.
func (c *Client) Delete(ctx context.Context, id string) (*queue.Job, error) {
	resp, err := c.api.Jobs.DeleteJob(ctx, connect.NewRequest(&jqv1.DeleteJobRequest{JobId: id}))
	if err != nil {
		return nil, CallError(opDelete, err)
	}
	return api.JobFromProto(resp.Msg.GetJob()), nil
}
