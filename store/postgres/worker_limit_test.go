package postgres_test

import (
	"testing"

	"github.com/jq-dev/jq/store/storetest"
)

// TestWorkerLimit counts every live worker of its database: a private one (in parallel with the
// other tests: the suite's setup marks it).
func TestWorkerLimit(t *testing.T) {
	storetest.RunWorkerLimit(t, contractPrivate)
}
