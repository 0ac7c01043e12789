package storetest

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// BenchConstrainedClaimBehindBlocked times a claim of 10 jobs whose queue holds a backlog of tenant a's
// jobs, a at its limit, ahead of tenant b's: the claim reads past a's backlog (no head-of-line
// blocking, at a cost that grows with the blocked backlog; docs/performance.md, "What bounds each
// workload").
// Each iteration claims one of b's jobs (b's limit is 1) and reports it, untimed. newStore returns
// a store of the benchmark's own: each size fills one. The 100k backlog runs with JQ_BENCH_LARGE=1
// only: filling it under -race is most of a minute, which the suite's once-each benchmark run
// (every benchmark, once) should not spend.
func BenchConstrainedClaimBehindBlocked[S interface {
	store.Store
	store.DispatchStore
	store.ConstraintStore
}](b *testing.B, newStore func(*testing.B) S) {
	for _, backlog := range []int{0, 1000, 10000, 100000} {
		b.Run("blocked="+strconv.Itoa(backlog), func(b *testing.B) {
			if backlog > 10000 && os.Getenv("JQ_BENCH_LARGE") == "" {
				b.Skip("set JQ_BENCH_LARGE=1 for the 100k backlog")
			}
			st := newStore(b)
			ctx := context.Background()
			_, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "hol"})
			require.NoError(b, err)
			_, err = st.ConstraintCreate(ctx, store.ConstraintCreateParams{Constraint: queue.Constraint{
				Name: "per-tenant", Match: queue.JobMatcher{Queue: "hol"}, Key: "{{.labels.tenant}}", Concurrency: 1}})
			require.NoError(b, err)
			set, err := st.ConstraintSet(ctx)
			require.NoError(b, err)
			insert := func(tenant string, n int) {
				for off := 0; off < n; off += 1000 {
					ps := make([]store.JobInsertParams, min(1000, n-off))
					for i := range ps {
						ps[i] = store.JobInsertParams{Queue: "hol", Type: "t", Labels: map[string]string{"tenant": tenant},
							Limits: &store.LimitKeys{Entries: []string{queue.LimitEntry("per-tenant", tenant)}, Gen: set.Gen}}
					}
					_, err := st.JobInsertMany(ctx, ps)
					require.NoError(b, err)
				}
			}
			_, err = st.WorkerRegister(ctx, store.WorkerRegisterParams{ID: "w", Queues: []string{"hol"}, Concurrency: 1000})
			require.NoError(b, err)
			p := store.JobClaimParams{Queue: "hol", WorkerID: "w", Limit: 10, Expect: set}
			if backlog > 0 { // a's first job takes a's slot; its backlog waits
				insert("a", backlog+1)
				got, err := st.JobClaimConstrained(ctx, store.JobClaimParams{Queue: "hol", WorkerID: "w", Limit: 1, Expect: set})
				require.NoError(b, err)
				require.Len(b, got.Jobs, 1)
			}
			insert("b", 10*b.N)
			b.ResetTimer()
			for range b.N {
				got, err := st.JobClaimConstrained(ctx, p)
				require.NoError(b, err)
				require.Len(b, got.Jobs, 1, "b's first job: one slot per tenant")
				b.StopTimer()
				_, err = st.JobReportMany(ctx, []store.JobReportParams{{JobLease: store.JobLease{ID: got.Jobs[0].ID, Attempt: 1, WorkerID: "w"}, Success: true}})
				require.NoError(b, err)
				b.StartTimer()
			}
		})
	}
}

// BenchConstrainedClaimManyKeys times a claim of 10 jobs of one key under a slow rate (a million
// starts a day per key: a bucket that gave a token stays short of full for a day) after other
// keys each took a token: none (keys=1) or 20,000. Their buckets are not full, so a claim that read
// every such bucket would cost more with every key ever seen; one that reads its candidates' keys
// costs the same. Each iteration's jobs are reported done, untimed. newStore returns a store of the
// benchmark's own. The 20,000 keys need JQ_BENCH_LARGE=1; without it 1,000 (taking 20,000 tokens
// under -race was 84 s of the embedded store's once-each benchmark run in the suite).
func BenchConstrainedClaimManyKeys[S interface {
	store.Store
	store.DispatchStore
	store.ConstraintStore
}](b *testing.B, newStore func(*testing.B) S) {
	many := 20000
	if os.Getenv("JQ_BENCH_LARGE") == "" {
		many = 1000
	}
	for _, keys := range []int{1, many} {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			st := newStore(b)
			ctx := context.Background()
			_, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "mk"})
			require.NoError(b, err)
			_, err = st.ConstraintCreate(ctx, store.ConstraintCreateParams{Constraint: queue.Constraint{
				Name: "per-tenant", Match: queue.JobMatcher{Queue: "mk"}, Key: "{{.labels.tenant}}",
				Rate: queue.RateLimit{Limit: 1_000_000, Interval: 24 * time.Hour}}})
			require.NoError(b, err)
			set, err := st.ConstraintSet(ctx)
			require.NoError(b, err)
			insert := func(tenant func(i int) string, n int) {
				for off := 0; off < n; off += 1000 {
					ps := make([]store.JobInsertParams, min(1000, n-off))
					for i := range ps {
						t := tenant(off + i)
						ps[i] = store.JobInsertParams{Queue: "mk", Type: "t", Labels: map[string]string{"tenant": t},
							Limits: &store.LimitKeys{Entries: []string{queue.LimitEntry("per-tenant", t)}, Gen: set.Gen}}
					}
					_, err := st.JobInsertMany(ctx, ps)
					require.NoError(b, err)
				}
			}
			_, err = st.WorkerRegister(ctx, store.WorkerRegisterParams{ID: "w", Queues: []string{"mk"}, Concurrency: 1000})
			require.NoError(b, err)
			claim := func(limit int) []*queue.Job {
				got, err := st.JobClaimConstrained(ctx, store.JobClaimParams{Queue: "mk", WorkerID: "w", Limit: limit, Expect: set})
				require.NoError(b, err)
				if len(got.Jobs) > 0 {
					rs := make([]store.JobReportParams, len(got.Jobs))
					for i, j := range got.Jobs {
						rs[i] = store.JobReportParams{JobLease: store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: "w"}, Success: true}
					}
					_, err = st.JobReportMany(ctx, rs)
					require.NoError(b, err)
				}
				return got.Jobs
			}
			if keys > 1 { // every other key takes a token
				insert(func(i int) string { return "k" + strconv.Itoa(i) }, keys)
				for taken := 0; taken < keys; {
					n := len(claim(1000))
					require.Positive(b, n)
					taken += n
				}
			}
			insert(func(int) string { return "b" }, 10*b.N)
			p := store.JobClaimParams{Queue: "mk", WorkerID: "w", Limit: 10, Expect: set}
			b.ResetTimer()
			for range b.N {
				got, err := st.JobClaimConstrained(ctx, p)
				require.NoError(b, err)
				require.Len(b, got.Jobs, 10)
				b.StopTimer()
				rs := make([]store.JobReportParams, len(got.Jobs))
				for i, j := range got.Jobs {
					rs[i] = store.JobReportParams{JobLease: store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: "w"}, Success: true}
				}
				_, err = st.JobReportMany(ctx, rs)
				require.NoError(b, err)
				b.StartTimer()
			}
		})
	}
}
