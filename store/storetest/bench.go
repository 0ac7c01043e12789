package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/store"
)

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
