package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// workerLimitSuite runs the contract of WorkerRegisterParams.MaxLive (server.max_workers):
// concurrent registrations of different principals, as on several replicas, never take the cluster
// past the limit. The limit counts every live worker of the store: an isolated one.
func workerLimitSuite(t *testing.T, f Factory) {
	b := newBundle(t, isolatedStore(f))
	const limit = 5
	reg := func(id, principal string) error {
		_, err := b.s.WorkerRegister(b.ctx, store.WorkerRegisterParams{ID: id, Concurrency: 1, Queues: []string{b.queue},
			Principal: principal, MaxLive: limit})
		return err
	}
	// 24 registrations at once, by 6 principals (the per-principal lock alone would let 6 in).
	ids := make([]string, 24)
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i := range ids {
		ids[i] = uniqueName("w")
		wg.Go(func() { errs[i] = reg(ids[i], fmt.Sprintf("principal-%d", i%6)) })
	}
	wg.Wait()
	var live []string
	for i, err := range errs {
		if err == nil {
			live = append(live, ids[i])
			continue
		}
		require.ErrorIs(t, err, queue.ErrLimitReached)
	}
	require.Len(t, live, limit, "concurrent registrations do not overshoot server.max_workers")
	c, err := b.s.WorkerCounts(b.ctx, "", "")
	require.NoError(t, err)
	require.Equal(t, limit, c.Live)

	require.NoError(t, reg(live[0], ""), "a live id registers again at the limit")
	require.ErrorIs(t, reg(uniqueName("w"), ""), queue.ErrLimitReached)
	// An OFFLINE worker leaves room (unlike MaxOfPrincipal, the cluster limit counts live ones).
	require.NoError(t, b.s.WorkerDeregister(b.ctx, live[1]))
	require.NoError(t, reg(uniqueName("w"), ""))
	require.ErrorIs(t, reg(uniqueName("w"), ""), queue.ErrLimitReached)
}
