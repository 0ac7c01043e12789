package postgres_test

import (
	"testing"

	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/storetest"
)

var _ store.ScheduleStore = (*postgres.Store)(nil)

func TestScheduleStore(t *testing.T) {
	t.Parallel()
	storetest.RunScheduleStore(t, contractShared)
}
