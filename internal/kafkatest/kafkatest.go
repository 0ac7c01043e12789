// Package kafkatest reads jq's event topics back in tests, with franz-go's client (not the
// producer's library, so a check does not trust what it checks), and compares what it read with
// the stored events.
package kafkatest

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// Record is one consumed message, decoded.
type Record struct {
	Partition int32
	Offset    int64
	Value     []byte
	Event     *jqv1.JobEvent
	Headers   map[string]string
}

// Key names one event: the job and its per-job sequence number.
type Key struct {
	Job string
	Seq int64
}

// Row is one event as the checks compare it.
type Row struct {
	To     jqv1.JobState
	Reason string
	Worker string
}

// Consume reads a topic of the given partition count from the beginning up to the end offsets it
// takes first. Every value must decode as a jq.v1.JobEvent keyed by its job id.
func Consume(t testing.TB, brokers []string, topic string, partitions int) []Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	var total int64
	for p := range int32(partitions) { //nolint:gosec // a test's small partition count
		total += endOffset(ctx, t, cl, topic, p)
	}
	var out []Record
	for int64(len(out)) < total {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d messages of %s", len(out), total, topic)
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				require.NoError(t, fe.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			ev := new(jqv1.JobEvent)
			require.NoError(t, proto.Unmarshal(r.Value, ev), "the value decodes as jq.v1.JobEvent")
			require.Equal(t, ev.GetJobId(), string(r.Key), "key = job_id")
			rec := Record{Partition: r.Partition, Offset: r.Offset, Value: r.Value, Event: ev, Headers: map[string]string{}}
			for _, h := range r.Headers {
				rec.Headers[h.Key] = string(h.Value)
			}
			out = append(out, rec)
		})
	}
	require.Equal(t, total, int64(len(out)))
	return out
}

// endOffset asks for the end offset (high watermark) of one partition.
func endOffset(ctx context.Context, t testing.TB, cl *kgo.Client, topic string, partition int32) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = -1 // latest
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	for _, tr := range resp.Topics {
		for _, pr := range tr.Partitions {
			require.Zero(t, pr.ErrorCode)
			return pr.Offset
		}
	}
	t.Fatalf("no offset for %s/%d", topic, partition)
	return 0
}

// RequireAtLeastOnce checks that every row was consumed at least once (exactly once when exact),
// that nothing was consumed without a row, that a job's events share one partition and first
// appear in seq order, and that a duplicate is byte-for-byte the first copy. It returns the number
// of duplicates.
func RequireAtLeastOnce(t testing.TB, rows map[Key]Row, recs []Record, exact bool) (duplicates int) {
	t.Helper()
	seen := map[Key][]byte{}
	jobPartition := map[string]int32{}
	lastSeq := map[string]int64{}
	for _, r := range recs {
		k := Key{r.Event.GetJobId(), r.Event.GetSeq()}
		want, ok := rows[k]
		require.True(t, ok, "consumed event %v has no stored event", k)
		require.Equal(t, want.To, r.Event.GetToState(), "%v", k)
		require.Equal(t, want.Reason, r.Event.GetReason(), "%v", k)
		require.Equal(t, want.Worker, r.Event.GetWorkerId(), "%v", k)
		if p, ok := jobPartition[k.Job]; ok {
			require.Equal(t, p, r.Partition, "job %s spans partitions", k.Job)
		}
		jobPartition[k.Job] = r.Partition
		if prev, dup := seen[k]; dup {
			require.Equal(t, prev, r.Value, "duplicate %v differs", k)
			duplicates++
			continue
		}
		seen[k] = r.Value
		require.Equal(t, lastSeq[k.Job]+1, k.Seq, "job %s: seq %d after %d", k.Job, k.Seq, lastSeq[k.Job])
		lastSeq[k.Job] = k.Seq
	}
	require.Len(t, seen, len(rows), "every stored event is published")
	if exact {
		require.Zero(t, duplicates, "no event is published twice in normal operation")
	}
	return duplicates
}

// Rows reads every event of the database, one per transition (the event_rows view: job_events rows
// and batch elements).
func Rows(ctx context.Context, t testing.TB, db *sql.DB) map[Key]Row {
	t.Helper()
	rs, err := db.QueryContext(ctx, `SELECT job_id::text, seq, to_state, reason, worker_id FROM event_rows`)
	require.NoError(t, err)
	defer func() { _ = rs.Close() }()
	out := map[Key]Row{}
	for rs.Next() {
		var (
			k  Key
			r  Row
			to string
		)
		require.NoError(t, rs.Scan(&k.Job, &k.Seq, &to, &r.Reason, &r.Worker))
		v, ok := jqv1.JobState_value["JOB_STATE_"+to]
		require.True(t, ok, "event to_state %q has no jq.v1.JobState", to)
		r.To = jqv1.JobState(v)
		out[k] = r
	}
	require.NoError(t, rs.Err())
	return out
}
