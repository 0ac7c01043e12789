package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/store/sqlite"
)

func TestOpenTwiceRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jq.db")
	s := newPrivateStore(t, sqlite.Config{Path: path})
	_, err := sqlite.New(context.Background(), sqlite.Config{Path: path})
	require.Error(t, err)
	require.True(t, errors.Is(err, sqlite.ErrInUse), "%v", err)
	s.Close()
	again := newPrivateStore(t, sqlite.Config{Path: path}) // the lock went with Close
	require.NoError(t, again.Ping(context.Background()))
}

func TestBadSynchronous(t *testing.T) {
	t.Parallel()
	_, err := sqlite.New(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "x.db"), Synchronous: "OFF"})
	require.ErrorContains(t, err, "synchronous")
}
