package outbox_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/internal/kafkatest"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/roles/telemetry"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/storewrap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// kafka-go's writer keeps an idle connection reaper and franz-go's client a metadata
		// loop for a moment after Close.
		goleak.IgnoreTopFunction("github.com/segmentio/kafka-go.(*conn).run"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kgo.(*Client).updateMetadataLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// 1,000 jobs through the success, retry and dead-letter paths, relayed by two replicas at once:
// the consumed events equal the stored events one to one, each job's events are in one partition
// in seq order, and the dead-letter topic holds exactly the dead-lettered jobs.
func TestRelayPublishesEveryEventOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	k := startKafka(t, 0)
	brokers := k.ListenAddrs()
	e.startRelay(e.relayOptions(e.st, newSink(t, brokers)))
	e.startRelay(e.relayOptions(e.st, newSink(t, brokers)))
	for _, id := range []string{"w1", "w2", "w3", "w4"} {
		e.startWorker(id, 25)
	}

	start := time.Now()
	ids := e.submitMix(1000)
	e.waitSettled(60 * time.Second)
	e.waitPublished(30 * time.Second)
	rows := e.rows()
	t.Logf("%d jobs, %d events settled and published in %s", len(ids), len(rows), time.Since(start).Round(time.Millisecond))

	kafkatest.RequireAtLeastOnce(t, rows, consume(t, brokers, topicEvents), true)

	dead := e.deadLettered()
	require.Len(t, dead, 150)
	got := map[string]bool{}
	for _, r := range consume(t, brokers, topicDead) {
		require.Equal(t, jqv1.JobState_JOB_STATE_DEAD_LETTERED, r.Event.GetToState())
		require.Equal(t, "permanent_failure", r.Event.GetReason())
		require.False(t, got[r.Event.GetJobId()], "dead-lettered job %s published twice", r.Event.GetJobId())
		got[r.Event.GetJobId()] = true
	}
	require.Equal(t, dead, got)
}

// The broker stops under load: jobs keep completing, publish errors are counted and logged once,
// the backlog gauges rise, and after the broker returns the backlog drains to zero with nothing
// missing.
func TestRelayBrokerOutage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dataDir := t.TempDir()
	k := startKafka(t, 0, kfake.DataDir(dataDir))
	brokers := k.ListenAddrs()
	port := k.ListenAddrs()[0]
	relay, _ := e.startRelay(e.relayOptions(e.st, newSink(t, brokers)))
	reg := prometheus.NewRegistry()
	reg.MustRegister(telemetry.NewOutboxCollector(relay.Stats))
	for _, id := range []string{"w1", "w2"} {
		e.startWorker(id, 25)
	}

	t0 := time.Now()
	up := e.submitMix(300)
	e.waitSettled(60 * time.Second)
	upRate := float64(len(up)) / time.Since(t0).Seconds()
	e.waitPublished(30 * time.Second)

	k.Close() // the broker is down from here
	t1 := time.Now()
	down := e.submitMix(300)
	e.waitSettled(60 * time.Second)
	downRate := float64(len(down)) / time.Since(t1).Seconds()
	t.Logf("job throughput: %.0f jobs/s with the broker up, %.0f jobs/s with it down", upRate, downRate)

	testenv.Eventually(t, 10*time.Second, func() error {
		if v := gauge(t, reg, "jq_outbox_backlog_events"); v < 300*4 {
			return errors.New("backlog gauge has not risen")
		}
		return nil
	})
	require.Positive(t, gauge(t, reg, "jq_outbox_oldest_unpublished_seconds"))
	testenv.Eventually(t, 10*time.Second, func() error {
		if counter(t, reg, "jq_kafka_publish_errors_total", topicEvents) <= 0 {
			return errors.New("no publish error counted")
		}
		return nil
	})
	backlog := gauge(t, reg, "jq_outbox_backlog_events")

	// Same port, same data: the broker comes back with what it had.
	t2 := time.Now()
	k2 := startKafka(t, portOf(t, port), kfake.DataDir(dataDir))
	testenv.Eventually(t, 30*time.Second, func() error {
		if v := gauge(t, reg, "jq_outbox_backlog_events"); v > 0 {
			return errors.New("backlog not drained")
		}
		return nil
	})
	t.Logf("backlog of %.0f events drained in %s after the broker returned", backlog, time.Since(t2).Round(time.Millisecond))
	require.Zero(t, gauge(t, reg, "jq_outbox_oldest_unpublished_seconds"))

	dups := kafkatest.RequireAtLeastOnce(t, e.rows(), consume(t, k2.ListenAddrs(), topicEvents), false)
	t.Logf("%d duplicates", dups)
	require.Equal(t, 1, e.logs.FilterMessage("kafka publish failed; retrying").Len(), "one warning per outage")
	require.Equal(t, 1, e.logs.FilterMessage("kafka publish recovered").Len())
}

// killer is a store fault hook (storewrap.Options.Fault) that kills the relay at its second mark:
// from then on every store call fails, as if the process were gone, so the batch it had just
// published is neither marked nor released.
type killer struct {
	marks  atomic.Int32
	dead   atomic.Bool
	killed chan struct{}
}

var errKilled = errors.New("relay killed")

func (k *killer) fault(_ context.Context, method string) error {
	if k.dead.Load() {
		return errKilled
	}
	if method == "EventsMarkPublished" && k.marks.Add(1) == 2 {
		k.dead.Store(true)
		close(k.killed)
		return errKilled
	}
	return nil
}

// A relay killed between publishing a batch and marking it: after the lease, the next relay
// publishes every event at least once, and the duplicates are the same events (same seq, same
// bytes).
func TestRelayKilledMidBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	k := startKafka(t, 0)
	brokers := k.ListenAddrs()
	ps := make([]store.JobInsertParams, 100)
	for i := range ps {
		ps[i] = store.JobInsertParams{Queue: e.queue, Type: typeOK}
	}
	for range 5 { // 500 submit events in 5 batches of 100; no worker runs
		_, err := e.st.JobInsertMany(e.ctx, ps)
		require.NoError(t, err)
	}

	opts := e.relayOptions(nil, newSink(t, brokers))
	opts.BatchSize = 100
	kill := &killer{killed: make(chan struct{})}
	opts.Store = storewrap.Wrap(e.st.Backend, storewrap.Options{Fault: kill.fault})
	_, stop := e.startRelay(opts)
	select {
	case <-kill.killed:
	case <-time.After(20 * time.Second):
		t.Fatal("the relay never reached its second batch")
	}
	stop()

	restarted := e.relayOptions(e.st, newSink(t, brokers))
	e.startRelay(restarted)
	e.waitPublished(30 * time.Second)
	dups := kafkatest.RequireAtLeastOnce(t, e.rows(), consume(t, brokers, topicEvents), false)
	require.GreaterOrEqual(t, dups, 100, "the killed batch is published again")
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

// metric returns the value of a gathered metric (with the label value, if any); -1 when absent.
func metric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return metric(t, reg, name, "")
}

func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	return metric(t, reg, name, label)
}
