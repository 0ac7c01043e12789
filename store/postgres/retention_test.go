package postgres_test

import (
	"testing"

	"github.com/jq-dev/jq/store/storetest"
)

// The retention pass deletes across every job of the database: a private one.
func TestRetentionStore(t *testing.T) {
	t.Parallel()
	storetest.RunRetentionStore(t, func(t *testing.T) storetest.RetentionStore { return privateStore(t) })
}
