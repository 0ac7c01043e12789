package postgres_test

import (
	"testing"

	"github.com/jq-dev/jq/store/storetest"
)

// The retention pass deletes across every job of the database: a private one.
func TestRetentionStore(t *testing.T) {
	t.Parallel()
	storetest.RunRetentionStore(t, contractPrivate)
}

// Results: the drop counts per queue, so the shared store does.
func TestResultStore(t *testing.T) {
	t.Parallel()
	storetest.RunResultStore(t, contractShared)
}
