package apiserver

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// defaultHeartbeatTimeout applies when Options.Workers leaves it unset
// (FR-020's default).
const defaultHeartbeatTimeout = queue.DefaultHeartbeatTimeout

// DispatchCounter is the Redis side of GetStats: store.Dispatcher's Counts.
type DispatchCounter interface {
	Counts(ctx context.Context, queues []string) ([]store.DispatchCounts, error)
}

// adminOps serves the S4 admin commands: stats, peek and purge-dlq.
type adminOps struct {
	store            Reader
	engine           *engine.Engine
	counter          DispatchCounter // nil: GetStats answers UNAVAILABLE
	heartbeatTimeout time.Duration
	maxPageBytes     int // PeekQueue's byte budget
}

// GetStats reports, per queue, the due PENDING jobs (Postgres, up to store.MaxReadyCount) and
// Redis's in-flight counts, with Postgres's dead-letter counts and live heartbeats.
func (s *adminOps) GetStats(ctx context.Context, _ *connect.Request[jqv1.GetStatsRequest]) (*connect.Response[jqv1.GetStatsResponse], error) {
	counter := s.counter
	if counter == nil {
		return nil, apierr.New(apierr.ErrNotConfigured, "this server has no Redis dispatcher to count")
	}
	qs, err := s.store.QueueList(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(qs))
	for i, q := range qs {
		names[i] = q.Name
	}
	counts, err := counter.Counts(ctx, names)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, apierr.New(apierr.ErrDependencyUnavailable, "redis is unavailable: "+firstLine(err.Error()))
	}
	dead, err := s.store.JobCountDeadLettered(ctx)
	if err != nil {
		return nil, err
	}
	ready, err := s.store.JobCountReady(ctx, names)
	if err != nil {
		return nil, err
	}
	timeout := s.heartbeatTimeout
	if timeout <= 0 {
		timeout = defaultHeartbeatTimeout
	}
	live, err := s.store.WorkerCountLive(ctx, timeout)
	if err != nil {
		return nil, err
	}
	out := &jqv1.GetStatsResponse{LiveHeartbeats: live}
	for _, c := range counts {
		out.Queues = append(out.Queues, &jqv1.QueueRuntimeStats{
			Queue: c.Queue, Ready: ready[c.Queue], Inflight: c.Inflight, DeadLettered: dead[c.Queue],
		})
		out.Inflight += c.Inflight
	}
	return connect.NewResponse(out), nil
}

// PeekQueue shows a queue's next jobs, or its newest dead letters, without
// their results (and payloads unless asked), within the page byte budget.
func (s *adminOps) PeekQueue(ctx context.Context, req *connect.Request[jqv1.PeekQueueRequest]) (*connect.Response[jqv1.PeekQueueResponse], error) {
	p, err := peekParams(req.Msg)
	if err != nil {
		return nil, err
	}
	p.WithData, p.MaxBytes = req.Msg.GetIncludePayloads(), s.maxPageBytes
	res, err := s.store.JobPeek(ctx, p)
	if err != nil {
		return nil, err
	}
	if !p.Dead && len(res.Jobs) > 0 {
		if res, err = s.weightedPeek(ctx, p, res); err != nil {
			return nil, err
		}
	}
	out := make([]*jqv1.Job, len(res.Jobs))
	for i, j := range res.Jobs {
		out[i] = api.JobProto(j)
		out[i].Result = nil
	}
	return connect.NewResponse(&jqv1.PeekQueueResponse{Jobs: out, Truncated: res.Truncated}), nil
}

// weightedPeek puts a queue with priority weights or a max_wait in the order its dispatch takes
// (engine.DispatchOrder, the claims' own rules); strict is the store's strict-priority answer,
// returned as it is for a queue without either. Each level's first jobs are read on their own: a
// weighted order can reach a low level's jobs before the high levels' backlog ends.
func (s *adminOps) weightedPeek(ctx context.Context, p store.JobPeekParams, strict store.JobPeekResult) (store.JobPeekResult, error) {
	q, err := s.store.QueueGet(ctx, p.Queue)
	if err != nil {
		return strict, err
	}
	if len(q.PriorityWeights) == 0 && q.MaxWait == 0 {
		return strict, nil
	}
	limit := p.Limit
	if limit == 0 {
		limit = store.DefaultPeekLimit
	}
	byLevel := map[int][]*queue.Job{}
	out := store.JobPeekResult{}
	for prio := queue.MinPriority; prio <= queue.MaxPriority; prio++ {
		lp := p
		lp.Priority = &prio
		res, err := s.store.JobPeek(ctx, lp)
		if err != nil {
			return strict, err
		}
		byLevel[prio] = res.Jobs
		out.Truncated = out.Truncated || res.Truncated
	}
	out.Jobs = s.engine.DispatchOrder(ctx, p.Queue, byLevel, limit)
	return out, nil
}

// PurgeDeadLetters deletes dead letters, only when confirmed.
func (s *adminOps) PurgeDeadLetters(ctx context.Context, req *connect.Request[jqv1.PurgeDeadLettersRequest]) (*connect.Response[jqv1.PurgeDeadLettersResponse], error) {
	m := req.Msg
	p := store.JobPurgeDeadLettersParams{Queue: m.GetQueue()}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if !m.GetConfirm() {
		return nil, apierr.New(apierr.ErrConfirmRequired, "purging dead letters needs confirm (the CLI's --yes); nothing was deleted")
	}
	n, err := s.engine.DeadLettersPurge(ctx, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.PurgeDeadLettersResponse{Deleted: n}), nil
}
