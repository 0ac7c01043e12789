package sqlite_test

import (
	"testing"

	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/sqlite"
	"github.com/jq-dev/jq/store/storetest"
)

var (
	_ store.OutboxStore    = (*sqlite.Store)(nil)
	_ store.RetentionStore = (*sqlite.Store)(nil)
	_ store.EventFeed      = (*sqlite.Store)(nil)
	_ store.ScheduleStore  = (*sqlite.Store)(nil)
	_ store.AdminStore     = (*sqlite.Store)(nil)
	_ store.DepthStore     = (*sqlite.Store)(nil)
)

func privateStore(t *testing.T) *sqlite.Store { return newPrivateStore(t, sqlite.Config{}) }

func sharedStore(t *testing.T) *sqlite.Store { return newStore(t) }

// The outbox statements act on every event of the database: a private one.
func TestOutboxStore(t *testing.T) {
	t.Parallel()
	storetest.RunOutboxStore(t, privateStore)
}

// The retention pass deletes across every job of the database: a private one.
func TestRetentionStore(t *testing.T) {
	t.Parallel()
	storetest.RunRetentionStore(t, privateStore)
}

func TestEventFeed(t *testing.T) {
	t.Parallel()
	storetest.RunEventFeed(t, sharedStore)
}

func TestScheduleStore(t *testing.T) {
	t.Parallel()
	storetest.RunScheduleStore(t, sharedStore)
}

func TestAdminStore(t *testing.T) {
	t.Parallel()
	storetest.RunAdminStore(t, sharedStore, privateStore)
}

func TestDepthStore(t *testing.T) {
	t.Parallel()
	storetest.RunDepthStore(t, privateStore)
}
