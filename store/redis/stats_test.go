package redisstore_test

import (
	"testing"

	"github.com/jq-dev/jq/store/storetest"
)

func TestDispatchCounts(t *testing.T) {
	storetest.RunDispatchCounts(t, newDispatcher)
}
