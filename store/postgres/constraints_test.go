package postgres_test

import (
	"context"
	"testing"

	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/storetest"
)

// BenchmarkConstrainedClaimBehindBlocked: storetest.BenchConstrainedClaimBehindBlocked on Postgres
// (docs/performance.md, "What bounds each workload").
func BenchmarkConstrainedClaimBehindBlocked(b *testing.B) {
	storetest.BenchConstrainedClaimBehindBlocked(b, func(b *testing.B) *postgres.Store {
		return stores.Postgres(context.Background(), b, 8)
	})
}

// BenchmarkConstrainedClaimManyKeys: storetest.BenchConstrainedClaimManyKeys on Postgres
// (docs/performance.md, "Loops the API can start, bounded").
func BenchmarkConstrainedClaimManyKeys(b *testing.B) {
	storetest.BenchConstrainedClaimManyKeys(b, func(b *testing.B) *postgres.Store {
		return stores.Postgres(context.Background(), b, 8)
	})
}
