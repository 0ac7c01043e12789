package sqlite_test

import (
	"testing"

	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/sqlite"
	"github.com/jq-dev/jq/store/storetest"
)

var _ store.Store = (*sqlite.Store)(nil)

func TestStore(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) store.Store { return contractStore(t) })
}

func TestWorkerLimit(t *testing.T) {
	storetest.RunWorkerLimit(t, contractPrivate)
}
