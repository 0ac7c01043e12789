package outbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/store"
)

// BenchmarkRelayDrain measures the relay's throughput: a backlog of 20,000 events (submits, no
// worker) drained to kfake by one relay with the production defaults (claim 500, kafka-go batch
// 100, linger 10 ms, snappy, acks=all). The figure is in docs/performance.md.
func BenchmarkRelayDrain(b *testing.B) {
	const events = 20_000
	e := newEnv(b)
	k := startKafka(b, 0)
	sink := newSink(b, k.ListenAddrs())
	for range b.N {
		b.StopTimer()
		ps := make([]store.JobInsertParams, 1000)
		for i := range ps {
			ps[i] = store.JobInsertParams{Queue: e.queue, Type: typeOK}
		}
		for range events / len(ps) {
			_, err := e.st.JobInsertMany(e.ctx, ps)
			require.NoError(b, err)
		}
		opts := e.relayOptions(e.st, sink)
		opts.BatchSize, opts.Lease, opts.PublishTimeout = 0, 0, 0 // defaults
		b.StartTimer()
		start := time.Now()
		_, stop := e.startRelay(opts)
		e.waitPublished(time.Minute)
		elapsed := time.Since(start)
		b.StopTimer()
		stop()
		b.ReportMetric(events/elapsed.Seconds(), "events/s")
		b.StartTimer()
	}
}
