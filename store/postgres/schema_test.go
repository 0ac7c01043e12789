package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/migrations"
)

func TestSchemaVersion(t *testing.T) {
	t.Parallel()
	v, dirty, err := testStore.SchemaVersion(context.Background())
	require.NoError(t, err)
	require.False(t, dirty)
	latest, err := migrations.Latest()
	require.NoError(t, err)
	require.Equal(t, latest, v, "the package's database is migrated to the embedded version")
}
