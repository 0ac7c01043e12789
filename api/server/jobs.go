package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/api/apierr"
	"github.com/jq-dev/jq/api/auth"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/internal/jobtrace"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

type jobService struct {
	store  Reader
	engine *engine.Engine
	limits Limits
	log    *zap.Logger
	now    func() time.Time // when a PENDING job is due (GetJob's waiting reason)
	trace  submitTracer
	watch  *watchHub // watch.go
	// watchers bounds the WatchJob and WatchEvents streams open here (server.max_streams,
	// auth.max_streams_per_principal); refused counts a refusal.
	watchers *streamCounter
	refused  func(reason string)
}

// openWatch takes a watch stream's slot, or refuses with RESOURCE_EXHAUSTED: a stream is held
// open and re-reads the store every second and at every change, so their number is bounded.
func (s *jobService) openWatch(ctx context.Context) (release func(), err error) {
	release, err = s.watchers.open(auth.Owner(ctx), s.limits)
	if err != nil {
		s.refused(auth.ReasonStreamLimit)
	}
	return release, err
}

// logSubmitted writes the debug line of one accepted job (never its payload).
func (s *jobService) logSubmitted(r store.JobInsertResult) {
	if ce := s.log.Check(zap.DebugLevel, "job submitted"); ce != nil {
		ce.Write(zap.String("job_id", r.Job.ID), zap.String("queue", r.Job.Queue), zap.String("type", r.Job.Type),
			zap.Int("priority", r.Job.Priority), zap.Bool("existing", r.Existing), jobtrace.JobLogField(r.Job))
	}
}

// CancelJob dead-letters a job that is not running, or asks the worker of a
// RUNNING one to stop it (FR-012).
func (s *jobService) CancelJob(ctx context.Context, req *connect.Request[jqv1.CancelJobRequest]) (*connect.Response[jqv1.CancelJobResponse], error) {
	j, err := s.cancel(ctx, req.Msg.GetJobId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.CancelJobResponse{
		Job:             api.JobProto(j),
		CancelRequested: j.State == queue.StateRunning && j.CancelRequested,
	}), nil
}

// cancel cancels one job the caller may change (engine.JobCancel) and returns it as it now stands:
// CancelJob, and the taskqueue.v1 facade's.
func (s *jobService) cancel(ctx context.Context, id string) (*queue.Job, error) {
	if err := validJobID(id); err != nil {
		return nil, err
	}
	if err := s.ownJob(ctx, id, true); err != nil {
		return nil, err
	}
	return s.engine.JobCancel(ctx, id)
}

// RetryJob re-enqueues a FAILED or DEAD_LETTERED job (FR-013).
func (s *jobService) RetryJob(ctx context.Context, req *connect.Request[jqv1.RetryJobRequest]) (*connect.Response[jqv1.RetryJobResponse], error) {
	if err := validJobID(req.Msg.GetJobId()); err != nil {
		return nil, err
	}
	j, err := s.engine.JobRetry(ctx, req.Msg.GetJobId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.RetryJobResponse{Job: api.JobProto(j)}), nil
}

// DeleteJob deletes a DONE or DEAD_LETTERED job with its history (admins only, by the policy).
func (s *jobService) DeleteJob(ctx context.Context, req *connect.Request[jqv1.DeleteJobRequest]) (*connect.Response[jqv1.DeleteJobResponse], error) {
	if err := validJobID(req.Msg.GetJobId()); err != nil {
		return nil, err
	}
	j, err := s.engine.JobDelete(ctx, req.Msg.GetJobId())
	if err != nil {
		return nil, err
	}
	out := api.JobProto(j)
	out.Payload, out.Result = nil, nil
	return connect.NewResponse(&jqv1.DeleteJobResponse{Job: out}), nil
}

// GetJobResult answers seed 001's result of a job: a success while a DONE job's result bytes are
// retained (keep_result, not yet consumed nor past its queue's result_retention), a failure for a
// FAILED or DEAD_LETTERED job; found = false otherwise, which is not an error. The stored checksum
// of a success is verified, so a corrupted result is never handed out as valid. consume takes a
// success away as it is returned; a failure is read from the job's record and stays.
func (s *jobService) GetJobResult(ctx context.Context, req *connect.Request[jqv1.GetJobResultRequest]) (*connect.Response[jqv1.GetJobResultResponse], error) {
	if err := validJobID(req.Msg.GetJobId()); err != nil {
		return nil, err
	}
	if err := s.ownJob(ctx, req.Msg.GetJobId(), req.Msg.GetConsume()); err != nil {
		return nil, err
	}
	var j *queue.Job
	var err error
	if req.Msg.GetConsume() {
		j, _, err = s.engine.JobConsumeResult(ctx, req.Msg.GetJobId())
	} else {
		j, err = s.store.JobGet(ctx, req.Msg.GetJobId())
	}
	if err != nil {
		return nil, err
	}
	out := &jqv1.GetJobResultResponse{State: api.StateProto(j.State)}
	if j.ResultKept() && queue.Checksum(j.Result) != j.ResultChecksum {
		return nil, apierr.New(apierr.ErrResultCorrupt, fmt.Sprintf("the stored result of job %s does not match its checksum", j.ID))
	}
	out.Result, out.Found = api.Outcome(j)
	return connect.NewResponse(out), nil
}

func (s *jobService) GetJob(ctx context.Context, req *connect.Request[jqv1.GetJobRequest]) (*connect.Response[jqv1.GetJobResponse], error) {
	j, err := s.getJob(ctx, req.Msg.GetJobId())
	if err != nil {
		return nil, err
	}
	s.readProgress(ctx, j)
	if j.State == queue.StatePending {
		j.Waiting = s.waiting(ctx, j)
	}
	return connect.NewResponse(&jqv1.GetJobResponse{Job: api.JobProto(j)}), nil
}

// waiting says why a PENDING job is not taken: a constraint that holds a due job back,
// else no worker for its queue or type; "" when nothing stands in its way. Best effort: a failed
// read says nothing rather than failing the job's read.
func (s *jobService) waiting(ctx context.Context, j *queue.Job) string {
	if now := s.now(); !j.NotBefore.After(now) {
		why, err := constraintWaiting(ctx, s.store, j, now)
		if err != nil {
			s.log.Warn("read constraints failed", zap.String("job_id", j.ID), zap.Error(err))
		}
		if why != "" {
			return why
		}
	}
	ws, err := s.store.WorkerList(ctx)
	if err != nil {
		s.log.Warn("read workers failed", zap.String("job_id", j.ID), zap.Error(err))
		return ""
	}
	return queue.Waiting(j.Queue, []string{j.Type}, ws)
}

// getJob reads one job the caller may see: GetJob, and the taskqueue.v1 facade's reads.
func (s *jobService) getJob(ctx context.Context, id string) (*queue.Job, error) {
	if err := validJobID(id); err != nil {
		return nil, err
	}
	j, err := s.store.JobGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if principal, only := ownJobsOnly(ctx); only {
		if err := jobOwnedBy(j, principal); err != nil {
			return nil, err
		}
	}
	return j, nil
}

func (s *jobService) ListJobs(ctx context.Context, req *connect.Request[jqv1.ListJobsRequest]) (*connect.Response[jqv1.ListJobsResponse], error) {
	if req.Msg.GetIdPrefix() != "" {
		return s.listByIDPrefix(ctx, req.Msg)
	}
	p, err := listParams(req.Msg)
	if err != nil {
		return nil, err
	}
	p.WithData = req.Msg.GetIncludePayloads()
	res, err := s.list(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]*jqv1.Job, len(res.Jobs))
	for i, j := range res.Jobs {
		out[i] = api.JobProto(j)
		if !p.WithData {
			out[i].Result = nil // its checksum and runtime too: no half a result
		}
	}
	return connect.NewResponse(&jqv1.ListJobsResponse{Jobs: out, NextPageToken: res.NextCursor}), nil
}

// list reads one page of the jobs the caller may see, within the page byte budget: ListJobs, and
// the taskqueue.v1 facade's.
func (s *jobService) list(ctx context.Context, p store.JobListParams) (store.JobListResult, error) {
	p.MaxBytes = s.limits.maxPageBytes()
	// A producer lists its own jobs; the store refuses a page token of another listing.
	p.Principal, _ = ownJobsOnly(ctx)
	return s.store.JobList(ctx, p)
}

func (s *jobService) ListJobEvents(ctx context.Context, req *connect.Request[jqv1.ListJobEventsRequest]) (*connect.Response[jqv1.ListJobEventsResponse], error) {
	if err := validJobID(req.Msg.GetJobId()); err != nil {
		return nil, err
	}
	if err := s.ownJob(ctx, req.Msg.GetJobId(), false); err != nil {
		return nil, err
	}
	evs, err := s.store.JobEvents(ctx, req.Msg.GetJobId())
	if err != nil {
		return nil, err
	}
	out := make([]*jqv1.JobEvent, len(evs))
	for i := range evs {
		out[i] = api.EventProto(&evs[i])
	}
	return connect.NewResponse(&jqv1.ListJobEventsResponse{Events: out}), nil
}

// listByIDPrefix answers ListJobs with id_prefix: the jobs whose id starts with it (a range of the
// primary key), those a producer may see only, in id order.
func (s *jobService) listByIDPrefix(ctx context.Context, m *jqv1.ListJobsRequest) (*connect.Response[jqv1.ListJobsResponse], error) {
	alone := proto.Clone(m).(*jqv1.ListJobsRequest)
	alone.IdPrefix, alone.PageSize = "", 0
	if !proto.Equal(alone, &jqv1.ListJobsRequest{}) {
		return nil, apierr.New(queue.ErrInvalidArgument, "id_prefix takes no other filter, page_token or include_payloads")
	}
	limit := int(m.GetPageSize())
	switch {
	case limit == 0:
		limit = store.MaxIDPrefixMatches
	case limit < 0 || limit > store.MaxIDPrefixMatches:
		return nil, apierr.New(queue.ErrInvalidArgument, fmt.Sprintf("page_size %d: with id_prefix want 1..%d", limit, store.MaxIDPrefixMatches))
	}
	ids, err := s.store.JobPrefixList(ctx, m.GetIdPrefix(), limit)
	if err != nil {
		return nil, err
	}
	principal, own := ownJobsOnly(ctx)
	out := make([]*jqv1.Job, 0, len(ids))
	for _, id := range ids {
		j, err := s.store.JobGet(ctx, id)
		if errors.Is(err, queue.ErrJobNotFound) {
			continue // deleted since
		}
		if err != nil {
			return nil, err
		}
		if own && j.Principal != principal {
			continue
		}
		p := api.JobProto(j)
		p.Payload, p.Result = nil, nil
		out = append(out, p)
	}
	return connect.NewResponse(&jqv1.ListJobsResponse{Jobs: out}), nil
}
