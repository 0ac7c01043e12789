package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/migrations"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/storetest"
)

// The retention pass deletes across every job of the database: a private one.
func TestRetentionStore(t *testing.T) {
	t.Parallel()
	storetest.RunRetentionStore(t, func(t *testing.T) storetest.RetentionStore {
		dsn := testenv.NewDatabase(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, migrations.Up(ctx, dsn))
		s, err := postgres.New(ctx, postgres.Config{DSN: dsn, MaxConns: 8})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s
	})
}
