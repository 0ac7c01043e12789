package postgres_test

import (
	"testing"

	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/storetest"
)

var _ store.AdminStore = (*postgres.Store)(nil)

func TestAdminStore(t *testing.T) {
	t.Parallel()
	storetest.RunAdminStore(t,
		contractShared,
		contractPrivate)
}

func TestDepthStore(t *testing.T) {
	t.Parallel()
	storetest.RunDepthStore(t, contractPrivate)
}
