package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

func runJobInsertTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("Fields", func(t *testing.T) {
		b := setup(t, newStore)
		runAt := time.Now().Add(time.Hour).UTC()
		p := store.JobInsertParams{
			Queue:          b.queue,
			Type:           "email.send",
			Payload:        []byte{0, 1, 2, 0xff},
			Priority:       9,
			MaxRetries:     ptr(2),
			TTL:            2 * time.Hour,
			Timeout:        45 * time.Second,
			RunAt:          runAt,
			IdempotencyKey: "k-1",
			Labels:         map[string]string{"tenant": "acme", "env": "prod"},
			KeepResult:     true,
			TraceContext:   map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		}
		j := b.insertOne(p)
		_, err := uuid.Parse(j.ID)
		require.NoError(t, err)
		require.Equal(t, b.queue, j.Queue)
		require.Equal(t, "email.send", j.Type)
		require.Equal(t, p.Payload, j.Payload)
		require.Equal(t, 9, j.Priority)
		require.Equal(t, queue.StatePending, j.State)
		require.Equal(t, 2, j.MaxRetries)
		require.Zero(t, j.RetryCount)
		require.Zero(t, j.Attempt)
		require.Equal(t, 2*time.Hour, j.TTL)
		require.Equal(t, 45*time.Second, j.Timeout)
		require.WithinDuration(t, runAt, j.NotBefore, time.Millisecond)
		require.WithinDuration(t, runAt.Add(2*time.Hour), j.ExpiresAt, time.Millisecond,
			"the TTL counts from when the job is due")
		require.Equal(t, "k-1", j.IdempotencyKey)
		require.Equal(t, p.Labels, j.Labels)
		require.True(t, j.KeepResult)
		require.Equal(t, p.TraceContext, j.TraceContext)
		require.Empty(t, j.WorkerID)
		require.Empty(t, j.LastError)
		require.Empty(t, j.FailureReason)
		require.Nil(t, j.Result)
		require.Empty(t, j.ResultChecksum)
		require.False(t, j.CreatedAt.IsZero())
		require.Equal(t, j.CreatedAt, j.UpdatedAt)
		require.True(t, j.StartedAt.IsZero())
		require.True(t, j.CompletedAt.IsZero())

		require.Equal(t, j, b.get(j.ID), "JobGet returns what JobInsertMany returned")
	})

	t.Run("QueueDefaults", func(t *testing.T) {
		b := setup(t, newStore)
		q := b.newQueue(store.QueueCreateParams{MaxRetries: ptr(7), TTL: time.Hour})
		res := b.insert(
			store.JobInsertParams{Queue: q.Name, Type: "t"},
			store.JobInsertParams{Queue: q.Name, Type: "t", MaxRetries: ptr(0), TTL: time.Minute},
		)
		d := res[0].Job
		require.Equal(t, 7, d.MaxRetries, "unset max_retries takes the queue's")
		require.Equal(t, time.Hour, d.TTL, "unset TTL takes the queue's")
		require.Equal(t, queue.DefaultJobTimeout, d.Timeout)
		require.Equal(t, d.CreatedAt, d.NotBefore, "no run_at: due at once")
		require.Equal(t, d.NotBefore.Add(time.Hour), d.ExpiresAt)
		require.Equal(t, 0, d.Priority)
		require.Equal(t, []byte{}, d.Payload)
		require.Nil(t, d.Labels)

		o := res[1].Job
		require.Zero(t, o.MaxRetries, "an explicit 0 overrides the queue's default")
		require.Equal(t, time.Minute, o.TTL)

		plain := b.insertOne(b.job("t")) // the bundle's queue has no TTL
		require.Zero(t, plain.TTL)
		require.True(t, plain.ExpiresAt.IsZero())
	})

	t.Run("FirstEvent", func(t *testing.T) {
		b := setup(t, newStore)
		j := b.insertOne(b.job("resize"))
		evs := b.events(j.ID)
		require.Len(t, evs, 1)
		e := evs[0]
		require.Equal(t, j.ID, e.JobID)
		require.EqualValues(t, 1, e.Seq)
		require.Equal(t, b.queue, e.Queue)
		require.Equal(t, "resize", e.Type)
		require.Equal(t, queue.State(""), e.From)
		require.Equal(t, queue.StatePending, e.To)
		require.Equal(t, "submitted", e.Reason)
		require.Empty(t, e.WorkerID)
		require.Zero(t, e.Attempt)
		require.Equal(t, j.CreatedAt, e.At)
	})

	t.Run("BatchOrder", func(t *testing.T) {
		b := setup(t, newStore)
		const n = 50
		ps := make([]store.JobInsertParams, n)
		for i := range ps {
			ps[i] = b.job("t")
			ps[i].Payload = []byte{byte(i)}
		}
		res := b.insert(ps...)
		seen := map[string]bool{}
		for i, r := range res {
			require.False(t, r.Existing)
			require.Equal(t, []byte{byte(i)}, r.Job.Payload, "results are in input order")
			require.False(t, seen[r.Job.ID], "ids are unique")
			seen[r.Job.ID] = true
			if i > 0 {
				require.True(t, r.Job.CreatedAt.After(res[i-1].Job.CreatedAt),
					"created_at keeps submit order inside a batch (FIFO within a priority)")
			}
		}
	})

	t.Run("Empty", func(t *testing.T) {
		b := setup(t, newStore)
		res, err := b.s.JobInsertMany(b.ctx, nil)
		require.NoError(t, err)
		require.Empty(t, res)
	})

	t.Run("CallerID", func(t *testing.T) {
		b := setup(t, newStore)
		id := uuid.NewString()
		p := b.job("t")
		p.ID = id
		require.Equal(t, id, b.insertOne(p).ID)

		_, err := b.s.JobInsertMany(b.ctx, []store.JobInsertParams{p})
		require.ErrorIs(t, err, queue.ErrInvalidArgument, "a taken id")

		p.ID = "not-a-uuid"
		_, err = b.s.JobInsertMany(b.ctx, []store.JobInsertParams{p})
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})

	t.Run("UnknownQueueFailsBatch", func(t *testing.T) {
		b := setup(t, newStore)
		missing := uniqueName("missing")
		_, err := b.s.JobInsertMany(b.ctx, []store.JobInsertParams{
			b.job("t"),
			{Queue: missing, Type: "t"},
			b.job("t"),
		})
		require.ErrorIs(t, err, queue.ErrQueueNotFound)
		require.Contains(t, err.Error(), missing, "the error names the queue")
		require.Empty(t, b.listAll(store.JobListParams{Queue: b.queue}), "nothing of the batch is stored")
	})

	t.Run("InvalidFailsBatch", func(t *testing.T) {
		b := setup(t, newStore)
		for _, bad := range []func(p *store.JobInsertParams){
			func(p *store.JobInsertParams) { p.Priority = 10 },
			func(p *store.JobInsertParams) { p.Priority = -1 },
			func(p *store.JobInsertParams) { p.MaxRetries = ptr(-1) },
			func(p *store.JobInsertParams) { p.TTL = -time.Second },
			func(p *store.JobInsertParams) { p.Timeout = -time.Second },
			func(p *store.JobInsertParams) { p.Queue = "Not Valid" },
			func(p *store.JobInsertParams) { p.Labels = map[string]string{"": "x"} },
		} {
			p := b.job("t")
			bad(&p)
			_, err := b.s.JobInsertMany(b.ctx, []store.JobInsertParams{b.job("t"), p})
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
		}
		require.Empty(t, b.listAll(store.JobListParams{Queue: b.queue}), "nothing of the batches is stored")
	})

	t.Run("SubMillisecondDurations", func(t *testing.T) {
		b := setup(t, newStore)
		p := b.job("t")
		p.TTL = time.Microsecond
		p.Timeout = 1500 * time.Microsecond
		j := b.insertOne(p)
		require.Positive(t, j.TTL, "a tiny TTL does not become 'none'")
		require.GreaterOrEqual(t, j.Timeout, p.Timeout)
	})
}

func runIdempotencyTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("SameSpecReturnsOriginal", func(t *testing.T) {
		b := setup(t, newStore)
		p := b.job("t")
		p.IdempotencyKey = "order-42"
		p.Labels = map[string]string{"a": "1", "b": "2"}
		first := b.insertOne(p)

		p.TraceContext = map[string]string{"traceparent": "other"} // not part of the spec
		p.Labels = map[string]string{"b": "2", "a": "1"}
		res := b.insert(p)
		require.True(t, res[0].Existing)
		require.Equal(t, first, res[0].Job)
		require.Len(t, b.listAll(store.JobListParams{Queue: b.queue}), 1)
		require.Len(t, b.events(first.ID), 1, "no second submission event")
	})

	t.Run("Principal", func(t *testing.T) {
		b := setup(t, newStore)
		p := b.job("t")
		p.IdempotencyKey, p.Principal = "order-7", "token:a"
		first := b.insertOne(p)
		require.Equal(t, "token:a", first.Principal)
		got, err := b.s.JobGet(b.ctx, first.ID)
		require.NoError(t, err)
		require.Equal(t, "token:a", got.Principal)
		// The same key and spec from another principal conflicts: it is not handed a job it may not see.
		p.Principal = "token:b"
		_, err = b.s.JobInsertMany(b.ctx, []store.JobInsertParams{p})
		require.ErrorIs(t, err, queue.ErrIdempotencyConflict)
		require.NotContains(t, err.Error(), first.ID, "the conflict does not name another principal's job")
		q := b.job("t")
		q.Principal = "token:b"
		other := b.insertOne(q)
		mine := b.listAll(store.JobListParams{Queue: b.queue, Principal: "token:b"})
		require.Len(t, mine, 1)
		require.Equal(t, other.ID, mine[0].ID)
		require.Len(t, b.listAll(store.JobListParams{Queue: b.queue}), 2)
	})

	t.Run("DifferentSpecConflicts", func(t *testing.T) {
		b := setup(t, newStore)
		p := b.job("t")
		p.IdempotencyKey = "order-42"
		first := b.insertOne(p)
		for _, change := range []func(p *store.JobInsertParams){
			func(p *store.JobInsertParams) { p.Payload = []byte(`{"n":2}`) },
			func(p *store.JobInsertParams) { p.Type = "other" },
			func(p *store.JobInsertParams) { p.Priority = 1 },
			func(p *store.JobInsertParams) { p.MaxRetries = ptr(queue.DefaultMaxRetries) },
			func(p *store.JobInsertParams) { p.TTL = time.Minute },
			func(p *store.JobInsertParams) { p.Timeout = time.Minute },
			func(p *store.JobInsertParams) { p.RunAt = time.Now().Add(time.Minute) },
			func(p *store.JobInsertParams) { p.Labels = map[string]string{"x": "y"} },
			func(p *store.JobInsertParams) { p.KeepResult = true },
		} {
			q := p
			change(&q)
			fresh := b.job("t")
			_, err := b.s.JobInsertMany(b.ctx, []store.JobInsertParams{fresh, q})
			require.ErrorIs(t, err, queue.ErrIdempotencyConflict, "%+v", q)
		}
		jobs := b.listAll(store.JobListParams{Queue: b.queue})
		require.Equal(t, []string{first.ID}, ids(jobs), "conflicting batches store nothing")
	})

	t.Run("KeyIsPerQueue", func(t *testing.T) {
		b := setup(t, newStore)
		other := b.newQueue(store.QueueCreateParams{})
		p := b.job("t")
		p.IdempotencyKey = "k"
		a := b.insertOne(p)
		p.Queue = other.Name
		c := b.insertOne(p)
		require.NotEqual(t, a.ID, c.ID)
	})

	t.Run("DuplicateInOneBatch", func(t *testing.T) {
		b := setup(t, newStore)
		p := b.job("t")
		p.IdempotencyKey = "dup"
		res := b.insert(p, p)
		require.False(t, res[0].Existing)
		require.True(t, res[1].Existing)
		require.Equal(t, res[0].Job.ID, res[1].Job.ID)

		q := p
		q.IdempotencyKey = "dup2"
		r := q
		r.Payload = []byte("different")
		_, err := b.s.JobInsertMany(b.ctx, []store.JobInsertParams{q, r})
		require.ErrorIs(t, err, queue.ErrIdempotencyConflict)
		require.Len(t, b.listAll(store.JobListParams{Queue: b.queue}), 1)
	})

	t.Run("Concurrent", func(t *testing.T) {
		b := setup(t, newStore)
		p := b.job("t")
		p.IdempotencyKey = "race"
		const callers = 50
		type outcome struct {
			res []store.JobInsertResult
			err error
		}
		out := make(chan outcome, callers)
		start := make(chan struct{})
		for range callers {
			go func() {
				<-start
				res, err := b.s.JobInsertMany(b.ctx, []store.JobInsertParams{p})
				out <- outcome{res, err}
			}()
		}
		close(start)
		var (
			id    string
			fresh int
		)
		for range callers {
			o := <-out
			require.NoError(t, o.err)
			require.Len(t, o.res, 1)
			if !o.res[0].Existing {
				fresh++
			}
			if id == "" {
				id = o.res[0].Job.ID
			}
			require.Equal(t, id, o.res[0].Job.ID, "every caller gets the same job")
		}
		require.Equal(t, 1, fresh, "exactly one caller created the job")
		require.Len(t, b.listAll(store.JobListParams{Queue: b.queue}), 1)
	})

	t.Run("ConcurrentOverlappingBatches", func(t *testing.T) {
		b := setup(t, newStore)
		const keys, callers = 10, 10
		errs := make(chan error, callers)
		for c := range callers {
			ps := make([]store.JobInsertParams, keys)
			for i := range ps {
				ps[i] = b.job("t")
				// Every caller submits the same keys, each in a different order.
				ps[i].IdempotencyKey = fmt.Sprintf("k%d", (i*(c+1)+c)%keys)
			}
			go func() {
				_, err := b.s.JobInsertMany(b.ctx, ps)
				errs <- err
			}()
		}
		for range callers {
			require.NoError(t, <-errs, "overlapping batches neither deadlock nor conflict")
		}
		require.Len(t, b.listAll(store.JobListParams{Queue: b.queue}), keys)
	})
}
