package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/jq-dev/jq/store/sqlite"
)

var (
	sharedOnce sync.Once
	shared     *sqlite.Store
	sharedErr  error
	sharedDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	if sharedDir != "" {
		_ = os.RemoveAll(sharedDir)
	}
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreCurrent()); err != nil {
			println("goleak:", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}

// newStore returns the package's shared store (the contract suites isolate their data by unique
// names), in a temporary directory removed when the tests end.
func newStore(t testing.TB) *sqlite.Store {
	t.Helper()
	sharedOnce.Do(func() {
		sharedDir, sharedErr = os.MkdirTemp("", "jq-sqlite-test-")
		if sharedErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shared, sharedErr = sqlite.New(ctx, sqlite.Config{Path: filepath.Join(sharedDir, "jq.db")})
		if sharedErr == nil {
			// Every contract test lists from this one store, among all the others' jobs: a list by
			// label or type walks them against a 150 ms budget, which measures the machine on a
			// loaded host (seen failing so). The budget is the product's, not the contract's.
			sqlite.SetListScanBound(shared, time.Minute)
		}
	})
	require.NoError(t, sharedErr)
	return shared
}

// newPrivateStore returns a store of the test's own, closed when the test ends.
func newPrivateStore(t testing.TB, cfg sqlite.Config) *sqlite.Store {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "jq.db")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sqlite.New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}
