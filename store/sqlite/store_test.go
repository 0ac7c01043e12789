package sqlite_test

import (
	"testing"

	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/sqlite"
	"github.com/jq-dev/jq/store/storetest"
	"github.com/jq-dev/jq/store/storewrap"
)

// The store implements every interface of package store, so Exercise runs every suite.
var (
	_ store.Store           = (*sqlite.Store)(nil)
	_ store.DispatchStore   = (*sqlite.Store)(nil)
	_ store.RecoveryStore   = (*sqlite.Store)(nil)
	_ store.OperatorStore   = (*sqlite.Store)(nil)
	_ store.ProgressStore   = (*sqlite.Store)(nil)
	_ store.RetentionStore  = (*sqlite.Store)(nil)
	_ store.OutboxStore     = (*sqlite.Store)(nil)
	_ store.EventFeed       = (*sqlite.Store)(nil)
	_ store.ScheduleStore   = (*sqlite.Store)(nil)
	_ store.AdminStore      = (*sqlite.Store)(nil)
	_ store.DepthStore      = (*sqlite.Store)(nil)
	_ store.ConstraintStore = (*sqlite.Store)(nil)
)

// factory gives the contract the package's shared store and private database files, as production
// code reaches a store: behind store/storewrap, which validates the arguments.
type factory struct{}

func (factory) Store(t testing.TB) store.Store {
	return storewrap.Wrap(newStore(t), storewrap.Options{})
}
func (factory) IsolatedStore(t testing.TB) store.Store {
	return storewrap.Wrap(privateStore(t), storewrap.Options{})
}

// TestStore runs the whole contract (store/storetest); one suite: -run '^TestStore$/^DispatchStore$'.
func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, factory{})
}

// BenchmarkStore runs the shared benchmarks (storetest.Benchmark).
func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, factory{})
}
