package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/workerconn"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/queue/inproc"
)

// TestRecordedTimesAreTheHandlers: a job's started_at is when its handler started and its runtime
// (completed_at - started_at) is the handler's, whatever the batching — for a 1.5 s job whose start
// is acknowledged 1 s in (the delayed ack), for 10 ms jobs acknowledged by their reports, and for
// jobs that waited behind others (prefetched) — over the API (a remote worker) and in-process (the
// worker of --role=all). The queue's average processing time is the handlers' mean.
func TestRecordedTimesAreTheHandlers(t *testing.T) {
	for _, tc := range []struct {
		name string
		conn func(b *bundle) executor.Conn
	}{
		{"remote", func(b *bundle) executor.Conn { return workerconn.New(b.cl) }},
		{"in-process", func(b *bundle) executor.Conn {
			return inproc.New(inproc.Options{Engine: b.eng, Workers: b.store})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setupEngine(t, engine.Options{})
			type span struct{ start, end time.Time }
			var (
				mu    sync.Mutex
				spans = map[string]span{}
			)
			mux := queue.NewMux()
			mux.RegisterFunc("timed", func(ctx context.Context, j *queue.Job) ([]byte, error) {
				var p struct{ MS int }
				if err := json.Unmarshal(j.Payload, &p); err != nil {
					return nil, err
				}
				start := time.Now()
				time.Sleep(time.Duration(p.MS) * time.Millisecond) // the work being timed
				mu.Lock()
				spans[j.ID] = span{start, time.Now()}
				mu.Unlock()
				return nil, nil
			})
			ex, err := executor.New(executor.Options{
				Conn: tc.conn(b), Handler: mux, WorkerID: "w-" + uuid.NewString()[:12], Hostname: "test",
				Concurrency: 2, Prefetch: 2, Queues: []string{b.queue}, Logger: zaptest.NewLogger(t),
			})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan error, 1)
			go func() { stopped <- ex.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("worker: %v", err)
				}
			})

			want := []int{1500, 10, 10, 10, 10, 10, 10, 10, 10}
			var ids []string
			for _, ms := range want {
				ids = append(ids, b.submit(&jqv1.JobSpec{Type: "timed", Payload: fmt.Appendf(nil, `{"ms":%d}`, ms)}))
			}
			var sum time.Duration
			for i, id := range ids {
				j := b.waitState(id, jqv1.JobState_JOB_STATE_DONE)
				mu.Lock()
				h := spans[id]
				mu.Unlock()
				started, completed := j.GetStartedAt().AsTime(), j.GetCompletedAt().AsTime()
				runtime := completed.Sub(started) // what job status shows as RUNTIME
				// The server's clock is this machine's: the start and the end may be off by the
				// calls' latency and goroutine scheduling (tens of ms on a loaded machine under
				// -race), never by the ack delay (1 s). The bounds leave room for the first and
				// still fail on the second.
				const slack = 300 * time.Millisecond
				require.WithinDuration(t, h.start, started, slack, "job %d (%d ms): started_at", i, want[i])
				require.WithinDuration(t, h.end, completed, slack, "job %d (%d ms): completed_at", i, want[i])
				require.InDelta(t, h.end.Sub(h.start).Seconds(), runtime.Seconds(), slack.Seconds(),
					"job %d (%d ms): runtime %v, the handler ran %v", i, want[i], runtime, h.end.Sub(h.start))
				sum += h.end.Sub(h.start)
			}
			st, err := b.cl.Queues.GetQueueStats(b.ctx, connect.NewRequest(&jqv1.GetQueueStatsRequest{Name: b.queue}))
			require.NoError(t, err)
			mean := sum / time.Duration(len(ids))
			require.InDelta(t, mean.Seconds(), st.Msg.GetStats().GetAvgProcessingTime().AsDuration().Seconds(), 0.1,
				"average processing time against the handlers' mean %v", mean)
		})
	}
}
