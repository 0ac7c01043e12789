package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
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

// TestGroupCommitIsolatesFailures: writes that arrive together are committed together, each in a
// savepoint; one that fails after it wrote (a batch whose second job's idempotency key is taken by
// another spec) rolls back all of its own writes and nothing of the others'.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	t.Parallel()
	s := newPrivateStore(t, sqlite.Config{})
	ctx := context.Background()
	_, err := s.QueueCreate(ctx, store.QueueCreateParams{Name: "g"})
	require.NoError(t, err)
	job := func(key, payload string) store.JobInsertParams {
		return store.JobInsertParams{Queue: "g", Type: "t", IdempotencyKey: key, Payload: []byte(payload)}
	}
	_, err = s.JobInsertMany(ctx, []store.JobInsertParams{job("k", `{"a":1}`)})
	require.NoError(t, err)
	const n = 64
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := []store.JobInsertParams{job("", `{}`)}
			if i%2 == 1 {
				batch = append(batch, job("k", `{"a":2}`)) // fails after the first job is written
			}
			_, errs[i] = s.JobInsertMany(ctx, batch)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i%2 == 0 {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, queue.ErrIdempotencyConflict)
		}
	}
	res, err := s.JobList(ctx, store.JobListParams{Queue: "g", Limit: 1000})
	require.NoError(t, err)
	require.Equal(t, 1+n, len(res.Jobs), "the keyed job and one job per successful batch; none of a failed batch")
}
