package storetest

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/store"
)

// dispatchBenchStore and constraintBenchStore are what the dispatch and constraint benchmarks take.
type (
	dispatchBenchStore interface {
		store.Store
		store.DispatchStore
	}
	constraintBenchStore interface {
		store.Store
		store.DispatchStore
		store.ConstraintStore
	}
)

// Benchmark runs the shared benchmarks against the stores f opens, as sub-benchmarks of one
// BenchmarkStore per backend: go test -run '^$' -bench 'BenchmarkStore/Statements$' ./store/postgres.
// The ones that fill a store take an isolated one each.
func Benchmark(b *testing.B, f Factory) {
	b.Run("JobInsertMany", func(b *testing.B) {
		s := f.Store(b)
		for _, n := range []int{1, 32, 1000} {
			b.Run("batch="+strconv.Itoa(n), func(b *testing.B) { BenchJobInsertMany(b, s, n) })
		}
	})
	b.Run("DispatchPath", func(b *testing.B) {
		s := as[dispatchBenchStore](b, f.Store(b))
		for _, n := range []int{100, 1000} {
			b.Run("batch="+strconv.Itoa(n), func(b *testing.B) { BenchDispatchPath(b, s, n) })
		}
	})
	b.Run("Statements", func(b *testing.B) { BenchStatements(b, as[dispatchBenchStore](b, f.Store(b)), 100) })
	isolated := func(b *testing.B) constraintBenchStore { return as[constraintBenchStore](b, f.IsolatedStore(b)) }
	b.Run("ConstrainedClaimBehindBlocked", func(b *testing.B) { BenchConstrainedClaimBehindBlocked(b, isolated) })
	b.Run("ConstrainedClaimManyKeys", func(b *testing.B) { BenchConstrainedClaimManyKeys(b, isolated) })
}

// BenchJobInsertMany measures JobInsertMany with batches of batchSize jobs (128-byte payloads, a
// label, no idempotency key) into a fresh queue. It reports jobs/s.
func BenchJobInsertMany(b *testing.B, s store.Store, batchSize int) {
	ctx := context.Background()
	q, err := s.QueueCreate(ctx, store.QueueCreateParams{Name: uniqueName("bench")})
	require.NoError(b, err)
	payload := make([]byte, 128)
	ps := make([]store.JobInsertParams, batchSize)
	for i := range ps {
		ps[i] = store.JobInsertParams{
			Queue: q.Name, Type: "bench", Payload: payload, Priority: i % 10,
			Labels: map[string]string{"bench": "insert"},
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := s.JobInsertMany(ctx, ps)
		if err != nil {
			b.Fatal(err)
		}
		if len(res) != batchSize {
			b.Fatalf("got %d results, want %d", len(res), batchSize)
		}
	}
	b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "jobs/s")
}
