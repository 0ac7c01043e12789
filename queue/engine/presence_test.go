package engine_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// countingNotifier counts the wake-up NOTIFYs (not the presence announcements) it sends.
type countingNotifier struct {
	store.Notifier
	wakeUps atomic.Int64
}

func (c *countingNotifier) Notify(ctx context.Context, queues []string) error {
	for _, q := range queues {
		if !strings.HasPrefix(q, "replica:") {
			c.wakeUps.Add(1)
		}
	}
	return c.Notifier.Notify(ctx, queues)
}

// TestWakeUpNotifyOnlyWithOtherReplicas: a replica alone sends no wake-up NOTIFY for new work
// (nothing else listens); once a second replica has announced itself on the channel, it does.
func TestWakeUpNotifyOnlyWithOtherReplicas(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := stores.Postgres(ctx, t, 8) // a database of its own: no other test's replicas on its channel
	disp := stores.Dispatcher(ctx, t)
	run := func(n store.Notifier) *engine.Engine {
		e, err := engine.New(engine.Options{Store: st, Dispatcher: disp, Notifier: n, Log: zaptest.NewLogger(t)})
		require.NoError(t, err)
		ectx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = e.Run(ectx); close(done) }()
		t.Cleanup(func() { stop(); <-done })
		return e
	}
	q, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "presence"})
	require.NoError(t, err)
	submit := func(e *engine.Engine) {
		_, err := e.Submit(ctx, store.JobInsertParams{Queue: q.Name, Type: "noop"})
		require.NoError(t, err)
	}

	n1 := &countingNotifier{Notifier: st}
	e1 := run(n1)
	// Once its listener is up (a wake-up may go out before: it cannot tell yet), a replica alone
	// skips every wake-up.
	require.Eventually(t, func() bool {
		submit(e1)
		return e1.WakeUpsSkipped() >= 1
	}, 10*time.Second, 20*time.Millisecond)
	sent, skipped := n1.wakeUps.Load(), e1.WakeUpsSkipped()
	require.Eventually(t, func() bool {
		submit(e1)
		return e1.WakeUpsSkipped() >= skipped+3
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, sent, n1.wakeUps.Load(), "alone: no wake-up NOTIFY")

	run(&countingNotifier{Notifier: st}) // a second replica announces itself
	require.Eventually(t, func() bool {
		submit(e1)
		return n1.wakeUps.Load() >= 1
	}, 10*time.Second, 20*time.Millisecond, "with another replica listening, new work is announced")
}
