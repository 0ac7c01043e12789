package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/internal/testenv/jqserver"
	"github.com/jq-dev/jq/queue"
)

// submitCalls is how many SubmitJob and SubmitJobs calls the server has answered.
func submitCalls(t *testing.T, srv *jqserver.Server) int {
	t.Helper()
	resp, err := http.Get("http://" + srv.MetricsAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	n := 0
	re := regexp.MustCompile(`(?m)^jq_grpc_request_duration_seconds_count\{[^}]*method="/jq\.v1\.JobService/SubmitJobs?"[^}]*\} (\d+)$`)
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		n += v
	}
	return n
}

// Concurrent Submits of one client share calls, and each caller still gets its own answer: its own
// job, or its own error when its job alone is refused (the batch goes out again job by job); a
// caller that leaves before its submit was sent submits nothing.
func TestSubmitsCoalesce(t *testing.T) {
	srv := jqserver.Start(t)
	c := newClient(t, client.Options{Addr: srv.Addr})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Submit(ctx, client.Job{Queue: "default", Type: "noop"}) // the connection, dialled
	require.NoError(t, err)
	before := submitCalls(t, srv)

	const n = 300
	var (
		wg   sync.WaitGroup
		ids  sync.Map
		errs = make([]error, n)
		gate = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-gate
			job := client.Job{Queue: "default", Type: "noop", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}
			if i%50 == 7 {
				job.Queue = "no-such-queue"
			}
			s, err := c.Submit(ctx, job)
			errs[i] = err
			if err == nil {
				_, dup := ids.LoadOrStore(s.ID, i)
				require.False(t, dup, "job %s returned twice", s.ID)
			}
		})
	}
	close(gate)
	wg.Wait()
	accepted := 0
	for i, err := range errs {
		if i%50 == 7 {
			require.ErrorIs(t, err, queue.ErrQueueNotFound, "submit %d", i)
			continue
		}
		require.NoError(t, err, "submit %d", i)
		accepted++
	}
	ids.Range(func(id, i any) bool {
		j, err := c.Get(ctx, id.(string))
		require.NoError(t, err)
		require.JSONEq(t, fmt.Sprintf(`{"i":%d}`, i), string(j.Payload), "job %s is the submit of its caller", id)
		return true
	})
	require.Equal(t, n-n/50, accepted)
	calls := submitCalls(t, srv) - before
	require.Positive(t, calls)
	require.Less(t, calls, n/2, "%d submits took %d calls", n, calls)
	t.Logf("%d submits, %d calls", n, calls)

	// A caller whose context ends while it waits returns at once; the others are unaffected.
	gone, leave := context.WithCancel(ctx)
	leave()
	_, err = c.Submit(gone, client.Job{Queue: "default", Type: "noop"})
	require.ErrorIs(t, err, context.Canceled)
	_, err = c.Submit(ctx, client.Job{Queue: "default", Type: "noop"})
	require.NoError(t, err)
}
