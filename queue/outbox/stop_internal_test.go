package outbox

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

func TestAfterStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	wctx, done := afterStop(ctx, 20*time.Millisecond)
	defer done()
	cancel()
	select {
	case <-wctx.Done():
		t.Fatal("ended with ctx, not grace after it")
	default:
	}
	select {
	case <-wctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("did not end grace after ctx")
	}

	wctx, done = afterStop(context.Background(), time.Hour)
	done()
	require.Error(t, wctx.Err(), "done ends it at once")
}

// stuckStore hands out one event once and records what happens to it.
type stuckStore struct {
	mu               sync.Mutex
	claimed          bool
	released, marked []int64
}

func (s *stuckStore) EventsClaim(ctx context.Context, _ store.EventsClaimParams) (store.OutboxClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed {
		<-ctx.Done()
		return store.OutboxClaim{}, ctx.Err()
	}
	s.claimed = true
	return store.OutboxClaim{
		Events: []store.OutboxEvent{{ID: 7, Event: queue.Event{JobID: "j", Seq: 1, To: queue.StatePending}}},
		Lease:  1, Through: 7,
	}, nil
}

func (s *stuckStore) EventsMarkPublished(_ context.Context, c store.OutboxClaim) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marked = append(s.marked, c.Through)
	return nil
}

func (s *stuckStore) EventsRelease(ctx context.Context, c store.OutboxClaim) error {
	if ctx.Err() != nil {
		return ctx.Err() // as Postgres would
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = append(s.released, c.Through)
	return nil
}

func (s *stuckStore) OutboxBacklog(context.Context) (store.OutboxBacklog, error) {
	return store.OutboxBacklog{}, nil
}

// hangingSink never answers until its context ends: a broker that accepts connections and stalls.
type hangingSink struct{ entered chan struct{} }

func (h *hangingSink) EventsPublish(ctx context.Context, _ string, _ []store.EventMessage) error {
	close(h.entered)
	<-ctx.Done()
	return ctx.Err()
}

func (h *hangingSink) Close() error { return nil }

// A relay stopped while a broker stalls its publish returns StopGrace after the stop, not after
// PublishTimeout, and releases the batch for the next relay.
func TestStopDoesNotWaitForAStalledBroker(t *testing.T) {
	t.Parallel()
	st := &stuckStore{}
	sink := &hangingSink{entered: make(chan struct{})}
	r, err := New(Options{
		Store: st, Sink: sink, Log: zap.NewNop(), Encode: api.MarshalEvent, TopicEvents: "e", TopicDeadLetter: "d",
		Lease: time.Hour, StopGrace: 50 * time.Millisecond, BacklogInterval: time.Hour,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		_ = r.Run(ctx)
		close(ran)
	}()
	<-sink.entered
	cancel()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay waited for the stalled broker (PublishTimeout is 30 min here)")
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Empty(t, st.marked)
	require.Equal(t, []int64{7}, st.released, "the batch is released for the next relay")
}
