package apiserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	tqv1 "github.com/jq-dev/jq/api/gen/taskqueue/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/handlers"
	"github.com/jq-dev/jq/store"
)

// taskQueueService serves seed 003's taskqueue.v1.TaskQueuePublicService as a facade over jq.v1:
// every RPC goes through the same jobService paths as its jq.v1 counterpart (engine submit,
// store reads, JobCancel, JobList), with the same ownership checks, so the facade writes no
// state of its own and cannot disagree with jq.v1 about a job. What it adds is translation:
// the seed's messages, its five statuses (statusOf) and its soft outcomes.
type taskQueueService struct {
	jobs *jobService
	// queue receives the facade's jobs: the seed's JobSpec names none.
	queue string
	log   *zap.Logger
}

// Seed 003's page sizes: 0 means 50, more than 200 is clamped (not refused).
const (
	tqDefaultPageSize = 50
	tqMaxPageSize     = 200
)

// SubmitJob submits the spec as a jq job of the built-in synthetic handler (handlers.Synthetic):
// the seed's numbers are its JSON payload, job_type the label tqJobTypeLabel (jq's listings
// return labels, not payloads), client_request_id its idempotency key
// (jq's conflict rule is the seed's: FAILED_PRECONDITION for the same key with another spec). The
// result is always kept, so GetJobResult can hand it out.
func (s *taskQueueService) SubmitJob(ctx context.Context, req *connect.Request[tqv1.SubmitJobRequest]) (*connect.Response[tqv1.SubmitJobResponse], error) {
	spec := req.Msg.GetSpec()
	if spec == nil {
		return nil, invalid("spec: missing")
	}
	// The jq type is the synthetic handler's, so job_type gets the check a type would.
	if err := store.ValidateJobType("spec.job_type", spec.GetJobType()); err != nil {
		return nil, err
	}
	if _, ok := spec.GetLabels()[tqJobTypeLabel]; ok {
		return nil, invalid("spec.labels: " + tqJobTypeLabel + " is reserved: it holds job_type")
	}
	labels := make(map[string]string, len(spec.GetLabels())+1)
	maps.Copy(labels, spec.GetLabels())
	labels[tqJobTypeLabel] = spec.GetJobType()
	res, err := s.jobs.submit(ctx, &jqv1.JobSpec{
		Queue: s.queue,
		Type:  handlers.TypeSynthetic,
		Payload: handlers.SyntheticJobPayload(handlers.SyntheticPayload{
			WorkDurationMS: spec.GetWorkDurationMs(), PayloadSizeBytes: spec.GetPayloadSizeBytes(),
		}),
		Labels:         labels,
		IdempotencyKey: req.Msg.GetClientRequestId(),
		KeepResult:     true,
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&tqv1.SubmitJobResponse{
		JobId:         res.Job.ID,
		InitialStatus: statusOf(res.Job),
		AcceptedAtMs:  unixMilli(res.Job.CreatedAt),
	}), nil
}

// GetJobStatus reads one job, as jq.v1's GetJob does.
func (s *taskQueueService) GetJobStatus(ctx context.Context, req *connect.Request[tqv1.GetJobStatusRequest]) (*connect.Response[tqv1.GetJobStatusResponse], error) {
	j, err := s.jobs.getJob(ctx, req.Msg.GetJobId())
	if err != nil {
		return nil, err
	}
	sum := summaryOf(j)
	out := &tqv1.GetJobStatusResponse{
		JobId: sum.GetJobId(), Status: sum.GetStatus(), CancelRequested: sum.GetCancelRequested(),
		CreatedAtMs: sum.GetCreatedAtMs(), StartedAtMs: sum.GetStartedAtMs(), FinishedAtMs: sum.GetFinishedAtMs(),
	}
	if out.Status == tqv1.JobStatus_FAILED {
		out.FailureReason = j.FailureReason
	}
	return connect.NewResponse(out), nil
}

// GetJobResult answers the terminal envelope from the job record itself: jq stores a job's final
// state and its output in one statement, so the seed's "terminal status without an envelope"
// window does not exist. It reads as jq.v1's GetJobResult does without consume.
func (s *taskQueueService) GetJobResult(ctx context.Context, req *connect.Request[tqv1.GetJobResultRequest]) (*connect.Response[tqv1.GetJobResultResponse], error) {
	j, err := s.jobs.getJob(ctx, req.Msg.GetJobId())
	if err != nil {
		return nil, err
	}
	out := &tqv1.GetJobResultResponse{JobId: j.ID}
	st := statusOf(j)
	switch st {
	case tqv1.JobStatus_DONE:
		if !j.ResultKept() {
			return nil, apierr.New(apierr.ErrResultNotRetained, fmt.Sprintf(
				"job %s was submitted without keep_result, or its result was consumed or passed its queue's result_retention: its output is not retained", j.ID))
		}
		if queue.Checksum(j.Result) != j.ResultChecksum {
			return nil, apierr.New(apierr.ErrResultCorrupt, fmt.Sprintf("the stored result of job %s does not match its checksum", j.ID))
		}
		out.OutputBytes, out.Checksum = j.Result, j.ResultChecksum
	case tqv1.JobStatus_FAILED:
		out.OutputSummary = j.LastError
		if out.OutputSummary == "" {
			out.OutputSummary = j.FailureReason
		}
	case tqv1.JobStatus_CANCELED:
		// A stopped running attempt left its worker's message; an earlier failure's does not count.
		out.OutputSummary = "cancelled while queued"
		if j.CancelRequested && j.LastError != "" {
			out.OutputSummary = j.LastError
		}
	default:
		return connect.NewResponse(out), nil // not terminal: result_ready false
	}
	out.ResultReady, out.TerminalStatus = true, st
	if !j.StartedAt.IsZero() && j.CompletedAt.After(j.StartedAt) {
		out.RuntimeMs = uint32(min(j.CompletedAt.Sub(j.StartedAt).Milliseconds(), int64(^uint32(0)))) //nolint:gosec // clamped
	}
	return connect.NewResponse(out), nil
}

// CancelJob cancels through jq.v1's path (engine.JobCancel). jq.v1 refuses a
// terminal job with FAILED_PRECONDITION; the seed wants a repeated cancel to be a deterministic
// OK, so that refusal becomes already_terminal with the job's current status.
func (s *taskQueueService) CancelJob(ctx context.Context, req *connect.Request[tqv1.CancelJobRequest]) (*connect.Response[tqv1.CancelJobResponse], error) {
	id := req.Msg.GetJobId()
	j, err := s.jobs.cancel(ctx, id)
	terminal := errors.Is(err, queue.ErrIllegalTransition)
	if terminal {
		j, err = s.jobs.getJob(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	if ce := s.log.Check(zap.DebugLevel, "job cancel requested"); ce != nil {
		ce.Write(zap.String("job_id", j.ID), zap.String("reason", queue.Excerpt(req.Msg.GetReason())),
			zap.Bool("already_terminal", terminal))
	}
	return connect.NewResponse(&tqv1.CancelJobResponse{
		JobId:           j.ID,
		Accepted:        !terminal,
		CurrentStatus:   statusOf(j),
		AlreadyTerminal: terminal,
	}), nil
}

// ListJobs pages through jq.v1's listing (jobService.list) with the seed's status filter turned
// into states and cancelled filters, and its sort into the store's direction.
func (s *taskQueueService) ListJobs(ctx context.Context, req *connect.Request[tqv1.ListJobsRequest]) (*connect.Response[tqv1.ListJobsResponse], error) {
	p, err := tqListParams(req.Msg)
	if err != nil {
		return nil, err
	}
	res, err := s.jobs.list(ctx, p)
	if err != nil {
		return nil, err
	}
	out := &tqv1.ListJobsResponse{Jobs: make([]*tqv1.JobSummary, len(res.Jobs)), Page: &tqv1.PageResponse{NextPageToken: res.NextCursor}}
	for i, j := range res.Jobs {
		out.Jobs[i] = summaryOf(j)
	}
	return connect.NewResponse(out), nil
}

// tqListParams converts a ListJobs request. Unknown enum values are refused rather than ignored:
// an ignored status would widen the listing.
func tqListParams(m *tqv1.ListJobsRequest) (store.JobListParams, error) {
	var p store.JobListParams
	switch m.GetSort() {
	case tqv1.JobSort_JOB_SORT_UNSPECIFIED, tqv1.JobSort_CREATED_AT_DESC:
	case tqv1.JobSort_CREATED_AT_ASC:
		p.Ascending = true
	default:
		return p, invalid(fmt.Sprintf("sort: %d is not a JobSort", int32(m.GetSort())))
	}
	p.Limit = int(min(m.GetPage().GetPageSize(), tqMaxPageSize))
	if p.Limit == 0 {
		p.Limit = tqDefaultPageSize
	}
	// "0" is the seed's offset of the first page.
	if tok := m.GetPage().GetPageToken(); tok != "0" {
		p.Cursor = tok
	}
	var err error
	p.States, p.CancelledIn, err = statusFilter(m.GetStatusFilter())
	return p, err
}

// statusFilter is the store filter that lists exactly the jobs statusOf maps into the given
// statuses (nothing for none: all statuses). A jq state that feeds two statuses (FAILED: QUEUED or
// RUNNING; DEAD_LETTERED: FAILED or CANCELED) gets a cancelled filter when only one is asked for.
func statusFilter(statuses []tqv1.JobStatus) ([]queue.State, map[queue.State]bool, error) {
	// For each jq state, the cancelled values (queue.Job.Cancelled) whose jobs are wanted.
	want := map[queue.State]map[bool]bool{}
	add := func(st queue.State, cancelled ...bool) {
		if want[st] == nil {
			want[st] = map[bool]bool{}
		}
		for _, c := range cancelled {
			want[st][c] = true
		}
	}
	for i, s := range statuses {
		switch s {
		case tqv1.JobStatus_QUEUED:
			add(queue.StatePending, false, true)
			add(queue.StateAssigned, false, true)
			add(queue.StateFailed, false)
		case tqv1.JobStatus_RUNNING:
			add(queue.StateRunning, false, true)
			add(queue.StateFailed, true)
		case tqv1.JobStatus_DONE:
			add(queue.StateDone, false, true)
		case tqv1.JobStatus_FAILED:
			add(queue.StateDeadLettered, false)
		case tqv1.JobStatus_CANCELED:
			add(queue.StateDeadLettered, true)
		default:
			return nil, nil, invalid(fmt.Sprintf("status_filter[%d]: %d is not a job status (want QUEUED..CANCELED)", i, int32(s)))
		}
	}
	var (
		states      []queue.State
		cancelledIn map[queue.State]bool
	)
	for _, st := range queue.States() { // a fixed order: the same filter, the same query
		cs, ok := want[st]
		if !ok {
			continue
		}
		states = append(states, st)
		if len(cs) == 1 {
			if cancelledIn == nil {
				cancelledIn = map[queue.State]bool{}
			}
			cancelledIn[st] = cs[true]
		}
	}
	return states, cancelledIn, nil
}

// statusOf maps a jq job to the seed's status (see docs/api.md). A FAILED job is between
// attempts: no attempt runs and it will be retried (or dead-lettered), and CancelJob ends it at
// once as it does a queued job, so it is QUEUED; but when its failure is the cancellation of a
// running attempt it is RUNNING with cancel_requested until the job lands in CANCELED, so that a
// cancelled running job never appears queued again.
func statusOf(j *queue.Job) tqv1.JobStatus {
	switch j.State {
	case queue.StatePending, queue.StateAssigned:
		return tqv1.JobStatus_QUEUED
	case queue.StateRunning:
		return tqv1.JobStatus_RUNNING
	case queue.StateFailed:
		if j.Cancelled() {
			return tqv1.JobStatus_RUNNING
		}
		return tqv1.JobStatus_QUEUED
	case queue.StateDone:
		return tqv1.JobStatus_DONE
	case queue.StateDeadLettered:
		if j.Cancelled() {
			return tqv1.JobStatus_CANCELED
		}
		return tqv1.JobStatus_FAILED
	}
	return tqv1.JobStatus_JOB_STATUS_UNSPECIFIED
}

// summaryOf is a job's JobSummary.
func summaryOf(j *queue.Job) *tqv1.JobSummary {
	st := statusOf(j)
	sum := &tqv1.JobSummary{
		JobId:       j.ID,
		Status:      st,
		JobType:     jobTypeOf(j),
		CreatedAtMs: unixMilli(j.CreatedAt),
		StartedAtMs: unixMilli(j.StartedAt),
		// A CANCELED job was cancelled whichever way it went; a DONE or FAILED one shows a cancel
		// that came too late.
		CancelRequested: j.CancelRequested || st == tqv1.JobStatus_CANCELED,
	}
	if st == tqv1.JobStatus_DONE || st == tqv1.JobStatus_FAILED || st == tqv1.JobStatus_CANCELED {
		sum.FinishedAtMs = unixMilli(j.CompletedAt)
	}
	return sum
}

// unixMilli is t in epoch milliseconds, 0 for the zero time.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// tqJobTypeLabel holds the seed's job_type of a job submitted through the facade.
const tqJobTypeLabel = "taskqueue.job_type"

// jobTypeOf is the seed's job_type of a job: the facade's label on a synthetic job, else (a jq.v1
// job, or one submitted before the facade ran synthetic jobs) its jq type.
func jobTypeOf(j *queue.Job) string {
	if jt := j.Labels[tqJobTypeLabel]; j.Type == handlers.TypeSynthetic && jt != "" {
		return jt
	}
	return j.Type
}
