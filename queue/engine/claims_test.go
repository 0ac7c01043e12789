package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/redis"
)

// countingStore is the real Postgres store, counting the claims the engine makes.
type countingStore struct {
	*postgres.Store
	claims atomic.Int64
}

func (s *countingStore) JobClaim(ctx context.Context, p store.JobClaimParams) ([]*queue.Job, error) {
	s.claims.Add(1)
	return s.Store.JobClaim(ctx, p)
}

// At low load every job is submitted, claimed and reported on its own: the session claims once
// per job. Neither the report that frees the slot nor the next call for work claims again when
// the last claim saw every due job and nothing new arrived since (such a claim finds nothing).
func TestSessionClaimsOncePerJobAtLowLoad(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	st := &countingStore{Store: h.store}
	rdb, _ := testenv.NewRedis(t)
	disp, err := redisstore.New(h.ctx, redisstore.Config{Client: rdb, KeyPrefix: h.prefix})
	require.NoError(t, err)
	eng, err := engine.New(engine.Options{
		Store: st, Dispatcher: disp, Log: h.log,
		SchedulerInterval: time.Hour, // no poll: every claim here follows a submit or a report
		LockTTL:           30 * time.Second,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() { _ = eng.Run(ctx); close(done) }()
	t.Cleanup(func() { eng.CloseSessions(); cancel(); <-done })
	defer cancel() // ends the stream's loop before the cleanups run

	q := "low-" + h.prefix[len(h.prefix)-8:]
	_, err = h.store.QueueCreate(h.ctx, store.QueueCreateParams{Name: q})
	require.NoError(t, err)
	w, err := eng.WorkerRegister(h.ctx, store.WorkerRegisterParams{ID: q + "-w", Hostname: "test", Concurrency: 4, Queues: []string{q}})
	require.NoError(t, err)
	s := eng.OpenSessionPrefetch(w, 0, 4)

	// The stream's loop: ask for work again as soon as the last jobs are handed over.
	out := make(chan *queue.Job)
	go func() {
		for {
			got, err := s.Next(ctx)
			if err != nil {
				return
			}
			for _, j := range got {
				select {
				case out <- j:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	const jobs = 20
	for range jobs {
		_, err := eng.Submit(h.ctx, store.JobInsertParams{Queue: q, Type: "noop"})
		require.NoError(t, err)
		var j *queue.Job
		select {
		case j = <-out:
		case <-time.After(30 * time.Second):
			t.Fatal("no job assigned within 30s")
		}
		outs, err := eng.Report(h.ctx, w.ID, []store.JobReportParams{{
			JobLease: store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: w.ID}, Success: true,
		}})
		require.NoError(t, err)
		require.NoError(t, outs[0].Err)
	}
	// A claim of its own for each job, and at most one more: the session's first, before any job.
	require.LessOrEqual(t, st.claims.Load(), int64(jobs+1), "claims that could only find nothing")
}
