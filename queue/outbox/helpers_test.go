package outbox_test

// The relay's integration tests run the real pieces: a private Postgres database (the outbox
// statements act on every event of it), Redis, the engine with in-process workers, the kafka-go
// sink, and franz-go's kfake as the broker; franz-go's own client consumes, so the check does not
// trust the producer's library.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/internal/kafkatest"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/queue/outbox"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/kafka"
)

const (
	topicEvents = "jq.job-events"
	topicDead   = "job.dead-lettered"
	partitions  = 4
)

// Job types of the in-process workers.
const (
	typeOK    = "ok"    // succeeds
	typeRetry = "retry" // fails its first attempt, then succeeds
	typeDead  = "dead"  // fails permanently: dead-lettered at once
)

type env struct {
	t     testing.TB
	ctx   context.Context
	st    *stores.PG
	eng   *engine.Engine
	queue string
	logs  *observer.ObservedLogs
	log   *zap.Logger
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	st := stores.Postgres(ctx, t, 16)
	disp := stores.Dispatcher(ctx, t)
	q, err := st.QueueCreate(ctx, store.QueueCreateParams{
		Name: "events", BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
	})
	require.NoError(t, err)

	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(zapcore.WarnLevel)).Core()))
	eng, err := engine.New(engine.Options{
		Store: st, Dispatcher: disp, Notifier: st, Log: log.Named("engine"),
		SchedulerInterval: 20 * time.Millisecond, ReaperInterval: 50 * time.Millisecond,
		HeartbeatTimeout: 5 * time.Minute,
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = eng.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	return &env{t: t, ctx: ctx, st: st, eng: eng, queue: q.Name, logs: logs, log: log}
}

// startKafka starts a one-broker kfake cluster with both topics; port 0 picks one.
func startKafka(t testing.TB, port int, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, topicEvents, topicDead)}, opts...)
	if port > 0 {
		opts = append(opts, kfake.Ports(port))
	}
	c, err := kfake.NewCluster(opts...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func newSink(t testing.TB, brokers []string) *kafkastore.Sink {
	t.Helper()
	sink, err := kafkastore.New(kafkastore.Config{
		Brokers: brokers, Acks: "all", Compression: "snappy", BatchSize: 100, Linger: 5 * time.Millisecond,
		DialTimeout: time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	return sink
}

// relayOptions are second-scale settings for tests.
func (e *env) relayOptions(st store.OutboxStore, sink store.EventSink) outbox.Options {
	return outbox.Options{
		Store: st, Sink: sink, Log: e.log.Named("outbox"), Encode: api.MarshalEvent,
		TopicEvents: topicEvents, TopicDeadLetter: topicDead,
		BatchSize: 200, Lease: 2 * time.Second, PublishTimeout: time.Second, PollInterval: 20 * time.Millisecond,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, BacklogInterval: 50 * time.Millisecond,
	}
}

// startRelay runs a relay until the returned stop is called (or the test ends).
func (e *env) startRelay(opts outbox.Options) (*outbox.Relay, func()) {
	e.t.Helper()
	r, err := outbox.New(opts)
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return r, stop
}

// startWorker runs an in-process worker on the engine: it acks every assignment and reports by
// job type.
func (e *env) startWorker(id string, concurrency int) {
	e.t.Helper()
	w, err := e.st.WorkerRegister(e.ctx, store.WorkerRegisterParams{ID: id, Hostname: "h", Concurrency: concurrency, Queues: []string{e.queue}})
	require.NoError(e.t, err)
	s := e.eng.OpenSession(w, concurrency)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			jobs, err := s.Next(ctx)
			if err != nil {
				return
			}
			leases := make([]store.JobLease, len(jobs))
			for i, j := range jobs {
				leases[i] = store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: id}
			}
			outs, err := e.eng.Ack(ctx, id, leases)
			if err != nil {
				return
			}
			var reports []store.JobReportParams
			for i, o := range outs {
				if o.Err != nil {
					continue
				}
				r := store.JobReportParams{JobLease: leases[i], Success: true}
				switch jobs[i].Type {
				case typeRetry:
					if jobs[i].Attempt == 1 {
						r = store.JobReportParams{JobLease: leases[i], Error: "try again", Reason: "error"}
					}
				case typeDead:
					r = store.JobReportParams{JobLease: leases[i], Error: "poison", Reason: "error", Permanent: true}
				}
				reports = append(reports, r)
			}
			if _, err := e.eng.Report(ctx, id, reports); err != nil {
				return
			}
		}
	}()
	e.t.Cleanup(func() { cancel(); s.Close(); <-done })
}

// submitMix submits n jobs: 60 % ok, 25 % retry, 15 % dead, shuffled.
func (e *env) submitMix(n int) []string {
	e.t.Helper()
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		typ := typeOK
		switch {
		case i%20 < 3:
			typ = typeDead
		case i%20 < 8:
			typ = typeRetry
		}
		ps[i] = store.JobInsertParams{Queue: e.queue, Type: typ}
	}
	rand.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	ids := make([]string, 0, n)
	for chunk := range slicesChunk(ps, 250) {
		res, err := e.eng.SubmitMany(e.ctx, chunk)
		require.NoError(e.t, err)
		for _, r := range res {
			ids = append(ids, r.Job.ID)
		}
	}
	return ids
}

func slicesChunk[T any](s []T, n int) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}

// waitSettled waits until every job of the database is DONE or DEAD_LETTERED.
func (e *env) waitSettled(timeout time.Duration) {
	e.t.Helper()
	testenv.Eventually(e.t, timeout, func() error {
		var n int
		if err := e.st.Pool().QueryRow(e.ctx,
			`SELECT count(*) FROM jobs WHERE state NOT IN ('DONE', 'DEAD_LETTERED')`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%d jobs not settled", n)
		}
		return nil
	})
}

func (e *env) waitPublished(timeout time.Duration) {
	e.t.Helper()
	testenv.Eventually(e.t, timeout, func() error {
		b, err := e.st.OutboxBacklog(e.ctx)
		if err != nil {
			return err
		}
		if b.Events > 0 {
			return fmt.Errorf("%d events unpublished", b.Events)
		}
		return nil
	})
}

func (e *env) rows() map[kafkatest.Key]kafkatest.Row {
	e.t.Helper()
	db := stdlib.OpenDBFromPool(e.st.Pool())
	defer func() { _ = db.Close() }()
	return kafkatest.Rows(e.ctx, e.t, db)
}

func (e *env) deadLettered() map[string]bool {
	e.t.Helper()
	rs, err := e.st.Pool().Query(e.ctx, `SELECT id::text FROM jobs WHERE state = 'DEAD_LETTERED'`)
	require.NoError(e.t, err)
	defer rs.Close()
	out := map[string]bool{}
	for rs.Next() {
		var id string
		require.NoError(e.t, rs.Scan(&id))
		out[id] = true
	}
	require.NoError(e.t, rs.Err())
	return out
}

// consume reads a topic from the beginning to its end offsets, with franz-go's client.
func consume(t *testing.T, brokers []string, topic string) []kafkatest.Record {
	t.Helper()
	return kafkatest.Consume(t, brokers, topic, partitions)
}
