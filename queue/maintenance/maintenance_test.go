package maintenance_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/maintenance"
	"github.com/jq-dev/jq/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeStore answers EventsPrune from a script and records the calls.
type fakeStore struct {
	mu      sync.Mutex
	answers []int64 // deleted per call; -1 fails
	calls   []store.EventsPruneParams
}

var errDown = errors.New("postgres down")

func (f *fakeStore) EventsPrune(_ context.Context, p store.EventsPruneParams) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, p)
	if len(f.answers) == 0 {
		return 0, nil
	}
	n := f.answers[0]
	f.answers = f.answers[1:]
	if n < 0 {
		return 0, errDown
	}
	return n, nil
}

func newMaint(t *testing.T, f *fakeStore, o maintenance.Options) (*maintenance.Maintenance, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	o.Store, o.Log = f, zap.New(core)
	if o.Retention == 0 {
		o.Retention = 7 * 24 * time.Hour
	}
	m, err := maintenance.New(o)
	require.NoError(t, err)
	return m, logs
}

func TestNewRequiresStoreLoggerAndRetention(t *testing.T) {
	t.Parallel()
	for _, o := range []maintenance.Options{
		{Log: zap.NewNop(), Retention: time.Hour},
		{Store: &fakeStore{}, Retention: time.Hour},
		{Store: &fakeStore{}, Log: zap.NewNop()},
	} {
		_, err := maintenance.New(o)
		require.Error(t, err)
	}
}

// A pass runs batches of BatchSize until one comes back short, with the configured retention.
func TestPassBatchesUntilShort(t *testing.T) {
	t.Parallel()
	f := &fakeStore{answers: []int64{100, 100, 7}}
	m, logs := newMaint(t, f, maintenance.Options{BatchSize: 100, Retention: 48 * time.Hour})
	require.Equal(t, int64(207), m.Pass(context.Background()))
	require.Len(t, f.calls, 3)
	for _, c := range f.calls {
		require.Equal(t, store.EventsPruneParams{OlderThan: 48 * time.Hour, Limit: 100}, c)
	}
	require.Equal(t, maintenance.Stats{Passes: 1, EventsDeleted: 207}, m.Stats())
	require.Equal(t, 1, logs.FilterMessage("expired job events deleted").Len())

	require.Zero(t, m.Pass(context.Background()), "nothing left")
	require.Equal(t, 1, logs.FilterMessage("expired job events deleted").Len(), "an empty pass logs nothing")
}

// With Kafka off the store is asked to expire unpublished events too: nothing will publish them.
func TestKafkaOffExpiresUnpublished(t *testing.T) {
	t.Parallel()
	f := &fakeStore{answers: []int64{3}}
	m, _ := newMaint(t, f, maintenance.Options{BatchSize: 100, Retention: time.Hour, KafkaOff: true})
	require.Equal(t, int64(3), m.Pass(context.Background()))
	require.Equal(t, []store.EventsPruneParams{{OlderThan: time.Hour, Limit: 100, Unpublished: true}}, f.calls)
}

func TestPassIsBounded(t *testing.T) {
	t.Parallel()
	f := &fakeStore{answers: []int64{10, 10, 10, 10, 10}}
	m, _ := newMaint(t, f, maintenance.Options{BatchSize: 10, MaxBatches: 3})
	require.Equal(t, int64(30), m.Pass(context.Background()))
	require.Len(t, f.calls, 3)
}

func TestBatchSizeCappedByTheStore(t *testing.T) {
	t.Parallel()
	f := &fakeStore{}
	m, _ := newMaint(t, f, maintenance.Options{BatchSize: 1_000_000})
	m.Pass(context.Background())
	require.Equal(t, store.MaxEventsPruneBatch, f.calls[0].Limit)
}

// An outage is logged at warn once, then at debug, and its end once.
func TestFailuresLogOncePerOutage(t *testing.T) {
	t.Parallel()
	f := &fakeStore{answers: []int64{5, -1, -1, -1, 0}}
	m, logs := newMaint(t, f, maintenance.Options{BatchSize: 5})
	ctx := context.Background()
	require.Equal(t, int64(5), m.Pass(ctx), "what was deleted before the failure counts")
	m.Pass(ctx)
	m.Pass(ctx)
	m.Pass(ctx)
	require.Equal(t, 1, logs.FilterMessage("event retention failed; retrying next pass").FilterLevelExact(zapcore.WarnLevel).Len())
	require.Equal(t, 2, logs.FilterMessage("event retention failed; retrying next pass").FilterLevelExact(zapcore.DebugLevel).Len())
	require.Equal(t, 1, logs.FilterMessage("event retention recovered").Len())
	require.Equal(t, maintenance.Stats{Passes: 1, Failures: 3, EventsDeleted: 5}, m.Stats())
}

func TestRunTicksAndStops(t *testing.T) {
	t.Parallel()
	f := &fakeStore{}
	m, logs := newMaint(t, f, maintenance.Options{Interval: 5 * time.Millisecond})
	stop := m.Start(context.Background())
	require.Eventually(t, func() bool { return m.Stats().Passes >= 3 }, 5*time.Second, time.Millisecond)
	stop()
	require.Equal(t, 1, logs.FilterMessage("maintenance stopped").Len())
}

// Against Postgres: published events past the retention go, unpublished ones stay.
func TestRunDeletesExpiredPublishedEvents(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := stores.Postgres(ctx, t, 4)
	_, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "retention"})
	require.NoError(t, err)
	var ps []store.JobInsertParams
	for range 25 {
		ps = append(ps, store.JobInsertParams{Queue: "retention", Type: "noop", Payload: []byte(`{}`)})
	}
	res, err := st.JobInsertMany(ctx, ps)
	require.NoError(t, err)
	evs, err := st.EventsClaim(ctx, store.EventsClaimParams{Limit: 20, Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, evs, 20)
	published := map[string]bool{}
	var pub []int64
	for _, e := range evs {
		published[e.JobID] = true
		pub = append(pub, e.ID)
	}
	require.NoError(t, st.EventsMarkPublished(ctx, pub))

	m, err := maintenance.New(maintenance.Options{Store: st, Log: zap.NewNop(), Retention: time.Millisecond,
		Interval: 5 * time.Millisecond, BatchSize: 3})
	require.NoError(t, err)
	stop := m.Start(ctx)
	defer stop()
	require.Eventually(t, func() bool { return m.Stats().EventsDeleted == 20 }, 10*time.Second, 5*time.Millisecond)
	for _, r := range res {
		got, err := st.JobEvents(ctx, r.Job.ID)
		require.NoError(t, err)
		if published[r.Job.ID] {
			require.Empty(t, got)
		} else {
			require.Len(t, got, 1)
			require.Equal(t, queue.StatePending, got[0].To)
		}
	}
	stop()
	require.Equal(t, int64(20), m.Stats().EventsDeleted)
}
