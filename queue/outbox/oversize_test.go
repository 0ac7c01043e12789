package outbox_test

import (
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/jq-dev/jq/internal/kafkatest"
	"github.com/jq-dev/jq/queue/outbox"
	"github.com/jq-dev/jq/store"
)

// oversized submits normal jobs (a W3C traceparent each) and two that are too large for Kafka: one
// by its trace context (8 KiB), one by its event itself (an 8 KiB reason, which no API writes
// today). The sizes are set in SQL, whatever the API's validation allows.
type oversized struct {
	normal            []string
	bigTrace, bigSelf string
}

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func (e *env) submitOversized(normal int) oversized {
	e.t.Helper()
	ps := make([]store.JobInsertParams, normal+2)
	for i := range ps {
		ps[i] = store.JobInsertParams{Queue: e.queue, Type: typeOK, TraceContext: map[string]string{"traceparent": traceparent}}
	}
	res, err := e.eng.SubmitMany(e.ctx, ps)
	require.NoError(e.t, err)
	var o oversized
	for _, r := range res[:normal] {
		o.normal = append(o.normal, r.Job.ID)
	}
	o.bigTrace, o.bigSelf = res[normal].Job.ID, res[normal+1].Job.ID
	b := make([]byte, 6<<10)
	_, _ = rand.Read(b)
	big := base64.StdEncoding.EncodeToString(b) // 8 KiB that no codec shrinks much
	// As if submitted with that trace context: the job and its event carry it.
	_, err = e.st.Pool().Exec(e.ctx, `UPDATE jobs SET trace_context = jsonb_build_object('traceparent', $2::text) WHERE id = $1`, o.bigTrace, big)
	require.NoError(e.t, err)
	_, err = e.st.Pool().Exec(e.ctx, `UPDATE event_batches SET traces[array_position(job_ids, $1::uuid)] = jsonb_build_object('traceparent', $2::text)
		WHERE $1::uuid = ANY(job_ids)`, o.bigTrace, big)
	require.NoError(e.t, err)
	_, err = e.st.Pool().Exec(e.ctx, `UPDATE event_batches SET reasons[array_position(job_ids, $1::uuid)] = $2
		WHERE $1::uuid = ANY(job_ids)`, o.bigSelf, big)
	require.NoError(e.t, err)
	return o
}

// check: every event is published except bigSelf's, which is parked; bigTrace's goes without its
// trace context, marked truncated; the others keep theirs.
func (e *env) checkOversized(t *testing.T, o oversized, brokers []string, relay *outbox.Relay) {
	t.Helper()
	e.waitPublished(30 * time.Second)
	rows := e.rows()
	delete(rows, kafkatest.Key{Job: o.bigSelf, Seq: 1})
	recs := consume(t, brokers, topicEvents)
	kafkatest.RequireAtLeastOnce(t, rows, recs, false)
	for _, r := range recs {
		switch r.Event.GetJobId() {
		case o.bigTrace:
			require.Equal(t, map[string]string{"jq-truncated": "trace_context"}, r.Headers)
		case o.bigSelf:
			t.Fatalf("the parked event was published")
		default:
			require.Equal(t, map[string]string{"traceparent": traceparent}, r.Headers)
		}
	}
	require.Equal(t, map[string]int64{outbox.Trimmed: 1, outbox.Parked: 1}, relay.Stats().Oversized)
	require.EqualValues(t, len(rows), relay.Stats().Published)
}

// Events over kafka.max_event_bytes are trimmed or parked before they are sent; the relay never
// stalls on them.
func TestRelayCapsEventSize(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	k := startKafka(t, 0)
	o := e.submitOversized(20)
	opts := e.relayOptions(e.st, newSink(t, k.ListenAddrs()))
	opts.TraceHeaders, opts.MaxEventBytes = true, 4<<10
	relay, _ := e.startRelay(opts)
	e.checkOversized(t, o, k.ListenAddrs(), relay)
	require.Zero(t, relay.Stats().PublishErrors[topicEvents], "nothing too large was sent")
}

// A broker whose message.max.bytes is below the relay's cap refuses the batches that hold a large
// event (MESSAGE_TOO_LARGE): the relay publishes that batch's events one at a time, trims the event
// refused on its own, parks it if it is still refused, and goes on.
func TestRelayBrokerRefusesLargeEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	k := startKafka(t, 0, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4096"}))
	o := e.submitOversized(20)
	opts := e.relayOptions(e.st, newSink(t, k.ListenAddrs()))
	opts.TraceHeaders = true // and the default cap, 900 KiB
	relay, _ := e.startRelay(opts)
	e.checkOversized(t, o, k.ListenAddrs(), relay)
	require.Equal(t, 1, e.logs.FilterMessage("outbox event too large for kafka; parked, it stays in postgres and is not published").Len())
}
