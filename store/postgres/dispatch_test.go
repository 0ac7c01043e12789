package postgres_test

import (
	"strconv"
	"testing"

	"github.com/jq-dev/jq/store/storetest"
)

func TestDispatchStore(t *testing.T) {
	t.Parallel()
	storetest.RunDispatchStore(t, func(*testing.T) storetest.DispatchStore { return testStore })
}

func BenchmarkDispatchPath(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run("batch="+strconv.Itoa(size), func(b *testing.B) {
			storetest.BenchDispatchPath(b, testStore, size)
		})
	}
}

func BenchmarkStatements(b *testing.B) {
	storetest.BenchStatements(b, testStore, 100)
}
