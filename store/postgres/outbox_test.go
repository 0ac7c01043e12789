package postgres_test

import (
	"testing"

	"github.com/jq-dev/jq/store/storetest"
)

// The outbox statements act on every event of the database: a private one.
func TestOutboxStore(t *testing.T) {
	t.Parallel()
	storetest.RunOutboxStore(t, privateStore)
}
