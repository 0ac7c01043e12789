package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/migrations"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/storetest"
)

var _ store.AdminStore = (*postgres.Store)(nil)

func TestAdminStore(t *testing.T) {
	t.Parallel()
	storetest.RunAdminStore(t,
		func(*testing.T) storetest.AdminStore { return testStore },
		func(t *testing.T) storetest.AdminStore {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dsn := testenv.NewDatabase(t)
			require.NoError(t, migrations.Up(ctx, dsn))
			s, err := postgres.New(ctx, postgres.Config{DSN: dsn, MaxConns: 4})
			require.NoError(t, err)
			t.Cleanup(s.Close)
			return s
		})
}
