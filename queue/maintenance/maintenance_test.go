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

// fakeStore answers EventsPrune and JobResultsDrop from scripts and records the calls.
type fakeStore struct {
	mu      sync.Mutex
	answers []int64 // deleted per call; -1 fails
	calls   []store.EventsPruneParams
	drops   []map[string]int // dropped per call; nil fails
	dropped []int            // the limit of each JobResultsDrop call
}

func (f *fakeStore) JobResultsDrop(_ context.Context, limit int) (map[string]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropped = append(f.dropped, limit)
	if len(f.drops) == 0 {
		return map[string]int{}, nil
	}
	d := f.drops[0]
	f.drops = f.drops[1:]
	if d == nil {
		return nil, errDown
	}
	return d, nil
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

// After the events a pass drops expired results in batches until one comes back short, and counts
// and logs them per queue.
func TestPassDropsExpiredResults(t *testing.T) {
	t.Parallel()
	f := &fakeStore{drops: []map[string]int{{"a": 6, "b": 4}, {"a": 3}}}
	m, logs := newMaint(t, f, maintenance.Options{BatchSize: 10})
	require.Zero(t, m.Pass(context.Background()), "no events")
	require.Equal(t, []int{10, 10}, f.dropped)
	require.Equal(t, maintenance.Stats{Passes: 1, ResultsDropped: 13}, m.Stats())
	got := map[string]int64{}
	for _, e := range logs.FilterMessage("expired job results dropped").All() {
		got[e.ContextMap()["queue"].(string)] = e.ContextMap()["results"].(int64)
	}
	require.Equal(t, map[string]int64{"a": 9, "b": 4}, got)

	// A failing drop fails the pass; what it dropped before still counts.
	f.drops = []map[string]int{{"a": 10}, nil}
	m.Pass(context.Background())
	require.Equal(t, maintenance.Stats{Passes: 1, Failures: 1, ResultsDropped: 23}, m.Stats())
	require.Equal(t, 1, logs.FilterMessage("event retention failed; retrying next pass").
		FilterField(zap.String("step", "results")).Len())
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
	for range 5 {
		ps = append(ps, store.JobInsertParams{Queue: "retention", Type: "noop", Payload: []byte(`{}`)})
	}
	var res []store.JobInsertResult
	for range 5 { // 25 events in 5 batches: a claim of 20 takes the first 4
		r, err := st.JobInsertMany(ctx, ps)
		require.NoError(t, err)
		res = append(res, r...)
	}
	var c store.OutboxClaim
	require.Eventually(t, func() bool { // the relay's horizon becomes final within moments
		c, err = st.EventsClaim(ctx, store.EventsClaimParams{Limit: 20, Lease: time.Minute})
		require.NoError(t, err)
		return len(c.Events) > 0
	}, 10*time.Second, 5*time.Millisecond)
	require.Len(t, c.Events, 20)
	published := map[string]bool{}
	for _, e := range c.Events {
		published[e.JobID] = true
	}
	require.NoError(t, st.EventsMarkPublished(ctx, c))

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

// Against Postgres: a kept result goes once its queue's result_retention passed, one within its
// retention stays, and a fetch afterwards finds none.
func TestPassDropsExpiredResultsFromPostgres(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := stores.Postgres(ctx, t, 4)
	for _, q := range []store.QueueCreateParams{{Name: "short", ResultRetention: time.Hour}, {Name: "long"}} {
		_, err := st.QueueCreate(ctx, q)
		require.NoError(t, err)
	}
	done := func(q string) string {
		res, err := st.JobInsertMany(ctx, []store.JobInsertParams{{Queue: q, Type: "noop", KeepResult: true}})
		require.NoError(t, err)
		j := res[0].Job
		for _, to := range []queue.State{queue.StateAssigned, queue.StateRunning} {
			j, err = st.JobTransition(ctx, store.JobTransitionParams{ID: j.ID, From: j.State, To: to,
				Attempt: store.AnyAttempt, WorkerID: "w", Reason: "test"})
			require.NoError(t, err)
		}
		_, err = st.JobTransition(ctx, store.JobTransitionParams{ID: j.ID, From: j.State, To: queue.StateDone,
			Attempt: store.AnyAttempt, Reason: "test", Result: []byte(`"r"`)})
		require.NoError(t, err)
		return j.ID
	}
	expired, fresh, long := done("short"), done("short"), done("long")
	// Completed two hours ago: past the short queue's hour, within the long queue's 24 h.
	for _, id := range []string{expired, long} {
		_, err := st.Pool().Exec(ctx, `UPDATE jobs SET completed_at = now() - interval '2 hours' WHERE id = $1`, id)
		require.NoError(t, err)
	}

	m, err := maintenance.New(maintenance.Options{Store: st, Log: zap.NewNop(), Retention: 24 * time.Hour})
	require.NoError(t, err)
	m.Pass(ctx)
	require.Equal(t, int64(1), m.Stats().ResultsDropped)
	for id, kept := range map[string]bool{expired: false, fresh: true, long: true} {
		j, err := st.JobGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, kept, j.ResultKept(), id)
	}
	_, taken, err := st.JobConsumeResult(ctx, expired)
	require.NoError(t, err)
	require.False(t, taken, "dropped: nothing to fetch")
}

// Against Postgres: a pass deletes the progress of attempts that are over and keeps the live ones.
func TestPassPrunesFinishedProgress(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := stores.Postgres(ctx, t, 4)
	_, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "progress"})
	require.NoError(t, err)
	res, err := st.JobInsertMany(ctx, []store.JobInsertParams{{Queue: "progress", Type: "t"}, {Queue: "progress", Type: "t"}})
	require.NoError(t, err)
	var jobs []*queue.Job
	for _, r := range res {
		j, err := st.JobTransition(ctx, store.JobTransitionParams{ID: r.Job.ID, From: queue.StatePending, To: queue.StateAssigned,
			WorkerID: "w1", Reason: "test"})
		require.NoError(t, err)
		outs, err := st.JobProgressSet(ctx, store.JobProgressSetParams{WorkerID: "w1",
			Updates: []store.JobProgressUpdate{{ID: j.ID, Attempt: j.Attempt, Percent: 50}}})
		require.NoError(t, err)
		require.NoError(t, outs[0].Err)
		jobs = append(jobs, j)
	}
	_, err = st.JobTransition(ctx, store.JobTransitionParams{ID: jobs[0].ID, From: queue.StateAssigned, To: queue.StateFailed,
		Attempt: jobs[0].Attempt, Reason: "test"})
	require.NoError(t, err)

	m, err := maintenance.New(maintenance.Options{Store: st, Progress: st, Log: zap.NewNop(), Retention: time.Hour})
	require.NoError(t, err)
	m.Pass(ctx)
	rows := func(id string) int {
		var n int
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM job_progress WHERE job_id = $1`, id).Scan(&n))
		return n
	}
	require.Zero(t, rows(jobs[0].ID), "the failed attempt's progress is gone")
	require.Equal(t, 1, rows(jobs[1].ID), "the live attempt's progress stays")
	p, err := st.JobProgressGet(ctx, jobs[1].ID)
	require.NoError(t, err)
	require.Equal(t, 50, p.Percent)
}

// A pass deletes the rate buckets that refilled to full, and only those: with a fast rate the
// buckets of five keys go, with a slow one they stay.
func TestPassPrunesFullBuckets(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := stores.Postgres(ctx, t, 4)
	_, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "q"})
	require.NoError(t, err)
	for _, c := range []queue.Constraint{
		{Name: "fast", Match: queue.JobMatcher{Queue: "q"}, Key: "{{.labels.tenant}}",
			Rate: queue.RateLimit{Limit: 1000, Interval: time.Second, Burst: 1}},
		{Name: "slow", Match: queue.JobMatcher{Queue: "q", Type: "slow"}, Key: "{{.labels.tenant}}",
			Rate: queue.RateLimit{Limit: 1, Interval: time.Hour}},
	} {
		_, err := st.ConstraintCreate(ctx, store.ConstraintCreateParams{Constraint: c})
		require.NoError(t, err)
	}
	var ps []store.JobInsertParams
	for i, typ := range []string{"t", "t", "t", "slow", "slow"} {
		ps = append(ps, store.JobInsertParams{Queue: "q", Type: typ, Labels: map[string]string{"tenant": string(rune('a' + i))}})
	}
	_, err = st.JobInsertMany(ctx, ps)
	require.NoError(t, err)
	_, err = st.WorkerRegister(ctx, store.WorkerRegisterParams{ID: "w", Queues: []string{"q"}, Concurrency: 10})
	require.NoError(t, err)
	got, err := st.JobClaimConstrained(ctx, store.JobClaimParams{Queue: "q", WorkerID: "w", Limit: 10})
	require.NoError(t, err)
	require.Len(t, got.Jobs, 5) // 5 buckets of fast, 2 of slow

	core, _ := observer.New(zapcore.DebugLevel)
	m, err := maintenance.New(maintenance.Options{Store: &fakeStore{}, Buckets: st, Log: zap.New(core), Retention: time.Hour})
	require.NoError(t, err)
	require.Eventually(t, func() bool { m.Pass(ctx); return m.Stats().BucketsPruned >= 5 }, 10*time.Second, 5*time.Millisecond)
	m.Pass(ctx)
	require.EqualValues(t, 5, m.Stats().BucketsPruned, "the slow buckets are not full yet")
}
