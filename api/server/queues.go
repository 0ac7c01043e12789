package apiserver

import (
	"context"

	"connectrpc.com/connect"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

type queueService struct {
	store  Reader
	engine *engine.Engine
}

func (s *queueService) CreateQueue(ctx context.Context, req *connect.Request[jqv1.CreateQueueRequest]) (*connect.Response[jqv1.CreateQueueResponse], error) {
	p, err := queueParams(req.Msg)
	if err != nil {
		return nil, err
	}
	q, err := s.engine.QueueCreate(ctx, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.CreateQueueResponse{Queue: queueToProto(q)}), nil
}

func (s *queueService) UpdateQueue(ctx context.Context, req *connect.Request[jqv1.UpdateQueueRequest]) (*connect.Response[jqv1.UpdateQueueResponse], error) {
	p, err := queueUpdateParams(req.Msg)
	if err != nil {
		return nil, err
	}
	q, err := s.engine.QueueUpdate(ctx, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.UpdateQueueResponse{Queue: queueToProto(q)}), nil
}

func (s *queueService) DeleteQueue(ctx context.Context, req *connect.Request[jqv1.DeleteQueueRequest]) (*connect.Response[jqv1.DeleteQueueResponse], error) {
	if err := queue.ValidateQueueName(req.Msg.GetName()); err != nil {
		return nil, err
	}
	n, err := s.engine.QueueDelete(ctx, store.QueueDeleteParams{Name: req.Msg.GetName(), Force: req.Msg.GetForce()})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.DeleteQueueResponse{DeletedJobs: n}), nil
}

func (s *queueService) ListQueues(ctx context.Context, _ *connect.Request[jqv1.ListQueuesRequest]) (*connect.Response[jqv1.ListQueuesResponse], error) {
	qs, err := s.store.QueueList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*jqv1.Queue, len(qs))
	for i, q := range qs {
		out[i] = queueToProto(q)
	}
	return connect.NewResponse(&jqv1.ListQueuesResponse{Queues: out}), nil
}

func (s *queueService) GetQueue(ctx context.Context, req *connect.Request[jqv1.GetQueueRequest]) (*connect.Response[jqv1.GetQueueResponse], error) {
	if err := queue.ValidateQueueName(req.Msg.GetName()); err != nil {
		return nil, err
	}
	q, err := s.store.QueueGet(ctx, req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.GetQueueResponse{Queue: queueToProto(q)}), nil
}

func (s *queueService) GetQueueStats(ctx context.Context, req *connect.Request[jqv1.GetQueueStatsRequest]) (*connect.Response[jqv1.GetQueueStatsResponse], error) {
	if err := queue.ValidateQueueName(req.Msg.GetName()); err != nil {
		return nil, err
	}
	st, err := s.store.QueueStats(ctx, req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	out := queueStatsToProto(st)
	if s.engine != nil {
		for _, m := range s.engine.QueueHistory(st.Queue) {
			out.LastHour = append(out.LastHour, &jqv1.MinuteCount{Minute: api.Timestamp(m.Minute), Done: m.Done, Failed: m.Failed})
		}
	}
	return connect.NewResponse(&jqv1.GetQueueStatsResponse{Stats: out}), nil
}

func (s *queueService) PauseQueue(ctx context.Context, req *connect.Request[jqv1.PauseQueueRequest]) (*connect.Response[jqv1.PauseQueueResponse], error) {
	q, err := s.setPaused(ctx, req.Msg.GetName(), true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.PauseQueueResponse{Queue: q}), nil
}

func (s *queueService) ResumeQueue(ctx context.Context, req *connect.Request[jqv1.ResumeQueueRequest]) (*connect.Response[jqv1.ResumeQueueResponse], error) {
	q, err := s.setPaused(ctx, req.Msg.GetName(), false)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.ResumeQueueResponse{Queue: q}), nil
}

func (s *queueService) setPaused(ctx context.Context, name string, paused bool) (*jqv1.Queue, error) {
	if err := queue.ValidateQueueName(name); err != nil {
		return nil, err
	}
	q, err := s.engine.QueueSetPaused(ctx, store.QueueSetPausedParams{Name: name, Paused: paused})
	if err != nil {
		return nil, err
	}
	return queueToProto(q), nil
}
