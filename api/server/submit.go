package apiserver

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/store"
)

func (s *jobService) SubmitJob(ctx context.Context, req *connect.Request[jqv1.SubmitJobRequest]) (*connect.Response[jqv1.SubmitJobResponse], error) {
	res, err := s.submit(ctx, req.Msg.GetJob())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.SubmitJobResponse{JobId: res.Job.ID, Existing: res.Existing}), nil
}

// submit validates, stamps and submits one job through the engine, traced and logged: SubmitJob,
// and the taskqueue.v1 facade's.
func (s *jobService) submit(ctx context.Context, spec *jqv1.JobSpec) (_ store.JobInsertResult, err error) {
	ctx, span := s.trace.startSubmit(ctx, spec)
	defer func() { endSubmit(span, err) }()
	p, err := specToParams(spec, s.limits.MaxPayloadBytes, time.Now())
	if err != nil {
		return store.JobInsertResult{}, err
	}
	if err := stampSubmitter(ctx, &p); err != nil {
		return store.JobInsertResult{}, err
	}
	s.trace.stamp(ctx, &p)
	res, err := s.engine.Submit(ctx, p)
	if err != nil {
		return store.JobInsertResult{}, err
	}
	submitted(span, res)
	s.logSubmitted(res)
	return res, nil
}

func (s *jobService) SubmitJobs(ctx context.Context, req *connect.Request[jqv1.SubmitJobsRequest]) (_ *connect.Response[jqv1.SubmitJobsResponse], err error) {
	specs := req.Msg.GetJobs()
	ctx, span := s.trace.startBatch(ctx, len(specs))
	defer func() { endSubmit(span, err) }()
	if err := submitBatch(len(specs)); err != nil {
		return nil, err
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
