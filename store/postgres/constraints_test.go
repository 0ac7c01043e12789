package postgres_test

import (
	"context"
	"testing"

	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/storetest"
)

var _ store.ConstraintStore = (*postgres.Store)(nil)

// Constraints, their generation and their bound are the database's: a private one per test.
func TestConstraintStore(t *testing.T) {
	t.Parallel()
	storetest.RunConstraintStore(t, contractPrivate)
}

// BenchmarkConstrainedClaimBehindBlocked: storetest.BenchConstrainedClaimBehindBlocked on Postgres
// (docs/performance.md, "What bounds each workload").
func BenchmarkConstrainedClaimBehindBlocked(b *testing.B) {
	storetest.BenchConstrainedClaimBehindBlocked(b, func(b *testing.B) *postgres.Store {
		return stores.Postgres(context.Background(), b, 8).Backend
	})
}

// BenchmarkConstrainedClaimManyKeys: storetest.BenchConstrainedClaimManyKeys on Postgres
// (docs/performance.md, "Loops the API can start, bounded").
func BenchmarkConstrainedClaimManyKeys(b *testing.B) {
	storetest.BenchConstrainedClaimManyKeys(b, func(b *testing.B) *postgres.Store {
		return stores.Postgres(context.Background(), b, 8).Backend
	})
}
