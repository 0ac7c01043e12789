package server

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Submit limits of the contract (api/proto/jq/v1/job.proto).
const (
	maxTypeLen         = 128
	maxRetriesLimit    = 100
	maxJobTimeout      = 24 * time.Hour
	maxTTL             = 366 * 24 * time.Hour
	maxRunAtAhead      = 366 * 24 * time.Hour
	maxTraceContext    = 8
	maxSubmitBatchJobs = 1000
)

// specToParams validates one JobSpec and converts it. Every problem is
// INVALID_ARGUMENT with a message naming the field; nothing is written.
func specToParams(spec *jqv1.JobSpec, maxPayload int, now time.Time) (store.JobInsertParams, error) {
	if spec == nil {
		return store.JobInsertParams{}, invalid("job: missing")
	}
	if err := queue.ValidateQueueName(spec.GetQueue()); err != nil {
		return store.JobInsertParams{}, err
	}
	switch {
	case spec.GetType() == "":
		return store.JobInsertParams{}, invalid("type: required (the handler name, e.g. noop)")
	case len(spec.GetType()) > maxTypeLen:
		return store.JobInsertParams{}, invalid(fmt.Sprintf("type: at most %d bytes", maxTypeLen))
	case spec.GetPriority() < queue.MinPriority || spec.GetPriority() > queue.MaxPriority:
		return store.JobInsertParams{}, invalid(fmt.Sprintf("priority %d: want 0..9", spec.GetPriority()))
	case len(spec.GetPayload()) > maxPayload:
		return store.JobInsertParams{}, invalid(fmt.Sprintf("payload of %d bytes exceeds the limit of %d", len(spec.GetPayload()), maxPayload))
	case spec.MaxRetries != nil && (spec.GetMaxRetries() < 0 || spec.GetMaxRetries() > maxRetriesLimit):
		return store.JobInsertParams{}, invalid(fmt.Sprintf("max_retries %d: want 0..%d", spec.GetMaxRetries(), maxRetriesLimit))
	case len(spec.GetTraceContext()) > maxTraceContext:
		return store.JobInsertParams{}, invalid(fmt.Sprintf("trace_context: at most %d entries", maxTraceContext))
	}
	p := store.JobInsertParams{
		Queue:          spec.GetQueue(),
		Type:           spec.GetType(),
		Payload:        spec.GetPayload(),
		Priority:       int(spec.GetPriority()),
		IdempotencyKey: spec.GetIdempotencyKey(),
		Labels:         spec.GetLabels(),
		KeepResult:     spec.GetKeepResult(),
		TraceContext:   spec.GetTraceContext(),
	}
	if spec.MaxRetries != nil {
		n := int(spec.GetMaxRetries())
		p.MaxRetries = &n
	}
	if err := durationField("ttl", spec.GetTtl(), &p.TTL); err != nil {
		return p, err
	}
	if p.TTL > maxTTL {
		return p, invalid("ttl: at most 8784h")
	}
	if err := durationField("timeout", spec.GetTimeout(), &p.Timeout); err != nil {
		return p, err
	}
	if p.Timeout > maxJobTimeout {
		return p, invalid("timeout: at most 24h")
	}
	if spec.GetRunAt() != nil {
		if err := spec.GetRunAt().CheckValid(); err != nil {
			return p, invalid("run_at: " + err.Error())
		}
		p.RunAt = spec.GetRunAt().AsTime()
		if p.RunAt.After(now.Add(maxRunAtAhead)) {
			return p, invalid("run_at: at most one year ahead")
		}
	}
	if err := p.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

func (s *jobService) SubmitJob(ctx context.Context, req *connect.Request[jqv1.SubmitJobRequest]) (_ *connect.Response[jqv1.SubmitJobResponse], err error) {
	ctx, span := s.trace.startSubmit(ctx, req.Msg.GetJob())
	defer func() { endSubmit(span, err) }()
	p, err := specToParams(req.Msg.GetJob(), s.limits.MaxPayloadBytes, time.Now())
	if err != nil {
		return nil, err
	}
	if err := stampSubmitter(ctx, &p); err != nil {
		return nil, err
	}
	s.trace.stamp(ctx, &p)
	res, err := s.engine.Submit(ctx, p)
	if err != nil {
		return nil, err
	}
	submitted(span, res)
	s.logSubmitted(res)
	return connect.NewResponse(&jqv1.SubmitJobResponse{JobId: res.Job.ID, Existing: res.Existing}), nil
}

func (s *jobService) SubmitJobs(ctx context.Context, req *connect.Request[jqv1.SubmitJobsRequest]) (_ *connect.Response[jqv1.SubmitJobsResponse], err error) {
	specs := req.Msg.GetJobs()
	ctx, span := s.trace.startBatch(ctx, len(specs))
	defer func() { endSubmit(span, err) }()
	if len(specs) == 0 || len(specs) > maxSubmitBatchJobs {
		return nil, invalid(fmt.Sprintf("jobs: want 1..%d, got %d", maxSubmitBatchJobs, len(specs)))
	}
	now := time.Now()
	ps := make([]store.JobInsertParams, len(specs))
	for i, spec := range specs {
		p, err := specToParams(spec, s.limits.MaxPayloadBytes, now)
		if err != nil {
			return nil, fmt.Errorf("jobs[%d]: %w", i, err)
		}
		if err := stampSubmitter(ctx, &p); err != nil {
			return nil, fmt.Errorf("jobs[%d]: %w", i, err)
		}
		s.trace.stamp(ctx, &p)
		ps[i] = p
	}
	res, err := s.engine.SubmitMany(ctx, ps)
	if err != nil {
		return nil, err
	}
	for _, r := range res {
		s.logSubmitted(r)
	}
	out := &jqv1.SubmitJobsResponse{Results: make([]*jqv1.SubmitJobResponse, len(res))}
	for i, r := range res {
		out.Results[i] = &jqv1.SubmitJobResponse{JobId: r.Job.ID, Existing: r.Existing}
	}
	return connect.NewResponse(out), nil
}
