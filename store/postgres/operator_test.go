package postgres_test

import (
	"testing"

	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/storetest"
)

var _ store.OperatorStore = (*postgres.Store)(nil)

func TestOperatorStore(t *testing.T) {
	t.Parallel()
	storetest.RunOperatorStore(t, contractShared)
}
