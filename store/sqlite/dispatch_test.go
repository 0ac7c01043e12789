package sqlite_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/store/sqlite"
	"github.com/jq-dev/jq/store/storetest"
)

// benchStore is a store of the benchmark's own, closed when it ends.
func benchStore(b *testing.B) *sqlite.Store {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sqlite.New(ctx, sqlite.Config{Path: filepath.Join(b.TempDir(), "jq.db")})
	require.NoError(b, err)
	b.Cleanup(s.Close)
	return s
}

func BenchmarkDispatchPath(b *testing.B) {
	s := benchStore(b)
	for _, size := range []int{100, 1000} {
		b.Run("batch="+strconv.Itoa(size), func(b *testing.B) {
			storetest.BenchDispatchPath(b, s, size)
		})
	}
}

func BenchmarkStatements(b *testing.B) {
	storetest.BenchStatements(b, benchStore(b), 100)
}
