package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/redis"
	"github.com/jq-dev/jq/store/storewrap"
)

// A constraint created on one replica reaches another at once, by NOTIFY, not at the end of its
// scheduler interval (a minute here): the other replica's next submit is keyed with it.
func TestConstraintChangeNotifiesReplicas(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := "cnotify-" + h.prefix[len(h.prefix)-8:]
	_, err := h.store.QueueCreate(h.ctx, store.QueueCreateParams{Name: q})
	require.NoError(t, err)
	engines := make([]*engine.Engine, 2)
	for i := range engines {
		st, err := postgres.New(h.ctx, postgres.Config{DSN: testDSN, MaxConns: 4, ConnectTimeout: 5 * time.Second})
		require.NoError(t, err)
		rdb, _ := testenv.NewRedis(t)
		disp, err := redisstore.New(h.ctx, redisstore.Config{Client: rdb, KeyPrefix: h.prefix})
		require.NoError(t, err)
		eng, err := engine.New(engine.Options{Store: storewrap.Wrap(st, storewrap.Options{}), Dispatcher: disp, Notifier: st, Log: zap.NewNop(),
			SchedulerInterval: time.Minute})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = eng.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done; st.Close() })
		engines[i] = eng
	}
	submit := func() *queue.Job {
		res, err := engines[1].Submit(h.ctx, store.JobInsertParams{Queue: q, Type: "t", Labels: map[string]string{"tenant": "a"}})
		require.NoError(t, err)
		return res.Job
	}
	keys := func(id string) (entries []string, gen *int64) {
		require.NoError(t, h.store.Pool().QueryRow(h.ctx, `SELECT limit_keys, limit_gen FROM jobs WHERE id = $1`, id).Scan(&entries, &gen))
		return entries, gen
	}
	before := submit() // replica 1 reads the set: nothing applies to q
	_, gen := keys(before.ID)
	require.Nil(t, gen, "no constraint yet: the job is not keyed")

	_, err = engines[0].ConstraintCreate(h.ctx, store.ConstraintCreateParams{Constraint: queue.Constraint{
		Name: "notify-" + q, Match: queue.JobMatcher{Queue: q}, Key: "{{.labels.tenant}}", Concurrency: 1}})
	require.NoError(t, err)
	testenv.Eventually(t, 10*time.Second, func() error {
		entries, gen := keys(submit().ID)
		if gen == nil {
			return fmt.Errorf("replica 1 still keys submits with the set it read before the change")
		}
		require.Equal(t, []string{queue.LimitEntry("notify-"+q, "a")}, entries)
		return nil
	})
}

// A constraint whose matcher names a queue that does not exist is refused (NOT_FOUND on the wire)
// and nothing is stored: it would silently hold nothing back.
func TestConstraintCreateUnknownQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.startReplica()
	name := "cunknown-" + h.prefix[len(h.prefix)-8:]
	_, err := r.engine.ConstraintCreate(h.ctx, store.ConstraintCreateParams{Constraint: queue.Constraint{
		Name: name, Match: queue.JobMatcher{Queue: "nosuchqueue-" + h.prefix[len(h.prefix)-8:]}, Concurrency: 1}})
	require.ErrorIs(t, err, queue.ErrQueueNotFound)
	_, err = h.store.ConstraintGet(h.ctx, name)
	require.ErrorIs(t, err, queue.ErrConstraintNotFound, "nothing stored")
}
