package postgres_test

import (
	"testing"

	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/storetest"
)

var _ store.ConstraintStore = (*postgres.Store)(nil)

// Constraints, their generation and their bound are the database's: a private one per test.
func TestConstraintStore(t *testing.T) {
	t.Parallel()
	storetest.RunConstraintStore(t, privateStore)
}
