package postgres_test

import (
	"testing"

	"github.com/jq-dev/jq/store/storetest"
)

// The reaper's statements act on every worker and job of the database: a private one.
func TestRecoveryStore(t *testing.T) {
	storetest.RunRecoveryStore(t, contractPrivate)
}
