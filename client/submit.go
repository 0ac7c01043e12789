package client

import (
	"context"
	"encoding/json"
	"fmt"

	"connectrpc.com/connect"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
)

// MaxBatch is the most jobs one SubmitMany may carry.
const MaxBatch = 1000

// Submitted identifies an accepted job.
type Submitted struct {
	ID string
	// Existing: the idempotency key matched an earlier job with the same spec; ID is that job and
	// nothing new was created.
	Existing bool
}

// Submit durably accepts one job (PENDING) and returns its id once it is committed.
//
// Concurrent calls of one client share round trips: while two submit calls are on the wire, the
// Submits that arrive wait for the next free one and go out together as one SubmitJobs, each still
// returning its own job id, or its own error (a batch the server refused as a whole is sent again
// in halves until the refused jobs are alone). A lone call goes out at once. Each job's trace context travels in its spec. With
// custom Options.Interceptors every Submit is its own call, since an interceptor may read the
// call's context.
//
// Errors: [queue.ErrInvalidArgument] (the spec fails validation), [queue.ErrQueueNotFound],
// [queue.ErrIdempotencyConflict] (the key is taken by a different spec), [queue.ErrPermissionDenied],
// [queue.ErrUnauthenticated], [ErrUnavailable].
func (c *Client) Submit(ctx context.Context, job Job, opts ...Option) (Submitted, error) {
	spec, err := job.JobSpec(opts...)
	if err != nil {
		return Submitted{}, fmt.Errorf("submit: %w", err)
	}
	if c.submit != nil {
		s, err := c.submit.submit(ctx, spec)
		if err != nil {
			return Submitted{}, CallError(opSubmit, err)
		}
		return s, nil
	}
	resp, err := c.api.Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: spec}))
	if err != nil {
		return Submitted{}, CallError(opSubmit, err)
	}
	return Submitted{ID: resp.Msg.GetJobId(), Existing: resp.Msg.GetExisting()}, nil
}

// SubmitMany submits 1 to [MaxBatch] jobs atomically: all are accepted in one transaction, or none
// is and the error names the first bad one by its index ("jobs[3]: …"). opts apply to every job,
// before each job's own Options. The results are in the order of jobs.
func (c *Client) SubmitMany(ctx context.Context, jobs []Job, opts ...Option) ([]Submitted, error) {
	if len(jobs) == 0 || len(jobs) > MaxBatch {
		return nil, fmt.Errorf("submit: %w: want 1..%d jobs, got %d", queue.ErrInvalidArgument, MaxBatch, len(jobs))
	}
	specs := make([]*jqv1.JobSpec, len(jobs))
	for i, j := range jobs {
		spec, err := j.JobSpec(opts...)
		if err != nil {
			return nil, fmt.Errorf("submit: jobs[%d]: %w", i, err)
		}
		specs[i] = spec
	}
	resp, err := c.api.Jobs.SubmitJobs(ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: specs}))
	if err != nil {
		return nil, CallError(opSubmit, err)
	}
	out := make([]Submitted, len(resp.Msg.GetResults()))
	for i, r := range resp.Msg.GetResults() {
		out[i] = Submitted{ID: r.GetJobId(), Existing: r.GetExisting()}
	}
	return out, nil
}

// SubmitArgs submits a job whose payload is args encoded as JSON; a worker decodes it with
// queue.HandlerOf. It is a function rather than a method because Go methods take no type
// parameters.
func SubmitArgs[T any](ctx context.Context, c *Client, queueName, jobType string, args T, opts ...Option) (Submitted, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return Submitted{}, fmt.Errorf("submit: %w: payload: %w", queue.ErrInvalidArgument, err)
	}
	return c.Submit(ctx, Job{Queue: queueName, Type: jobType, Payload: json.RawMessage(b)}, opts...)
}
