package apiserver

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Submit validation is the API's trust boundary: whatever a client sends is either refused with
// INVALID_ARGUMENT and changes nothing, or becomes parameters inside every documented bound.
func FuzzSpecToParams(f *testing.F) {
	f.Add("default", "noop", int32(0), []byte(`{"ms":1}`), int32(3), true, int64(60), int64(30), "key", "k", "v", "traceparent", "00-x", int64(0))
	f.Add("Bad Queue", "", int32(10), []byte{}, int32(-1), true, int64(-1), int64(0), "", "", "", "", "", int64(-1))
	f.Add("q", "no\x00op", int32(9), make([]byte, 2048), int32(0), false, int64(1<<40), int64(1<<40), strings.Repeat("k", 300), "k", "v\x00", "", "", int64(1<<40))
	const maxPayload = 1024
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, q, typ string, priority int32, payload []byte, retries int32, hasRetries bool,
		ttlS, timeoutS int64, key, labelK, labelV, traceK, traceV string, runAtS int64) {
		spec := &jqv1.JobSpec{
			Queue: q, Type: typ, Priority: priority, Payload: payload, IdempotencyKey: key,
			Ttl: durationpb.New(time.Duration(ttlS) * time.Second), Timeout: durationpb.New(time.Duration(timeoutS) * time.Second),
		}
		if hasRetries {
			spec.MaxRetries = &retries
		}
		if labelK != "" {
			spec.Labels = map[string]string{labelK: labelV}
		}
		if traceK != "" {
			spec.TraceContext = map[string]string{traceK: traceV}
		}
		if runAtS != 0 {
			spec.RunAt = timestamppb.New(now.Add(time.Duration(runAtS) * time.Second))
		}
		p, err := specToParams(spec, maxPayload, now)
		if err != nil {
			requireRefusal(t, err)
			return
		}
		require.NoError(t, p.Validate(), "what the API accepts, every store accepts")
		require.NoError(t, queue.ValidateQueueName(p.Queue))
		require.NotEmpty(t, p.Type)
		require.LessOrEqual(t, len(p.Type), store.MaxTypeLen)
		require.True(t, p.Priority >= queue.MinPriority && p.Priority <= queue.MaxPriority)
		require.LessOrEqual(t, len(p.Payload), maxPayload)
		require.True(t, p.TTL > 0 && p.TTL <= store.MaxDuration, "ttl is positive: the spec sets it")
		require.True(t, p.Timeout > 0 && p.Timeout <= store.MaxJobTimeout, "timeout is positive: the spec sets it")
		require.False(t, p.RunAt.After(now.Add(store.MaxDuration)))
		require.LessOrEqual(t, len(p.IdempotencyKey), store.MaxIdempotencyKeyLen)
		for k, v := range p.Labels {
			require.True(t, len(k) >= 1 && len(k) <= store.MaxLabelKeyLen && len(v) <= store.MaxLabelValueLen)
		}
		for k, v := range p.TraceContext {
			require.True(t, len(k) >= 1 && len(k) <= store.MaxTraceContextKeyLen && len(v) <= store.MaxTraceContextValueLen)
		}
		if p.MaxRetries != nil {
			require.True(t, *p.MaxRetries >= 0 && *p.MaxRetries <= store.MaxJobRetries)
		}
	})
}

// requireRefusal: a refusal is INVALID_ARGUMENT, one line, and quotes little of the input.
func requireRefusal(t *testing.T, err error) {
	t.Helper()
	require.True(t, errors.Is(err, queue.ErrInvalidArgument), "refused, but not as INVALID_ARGUMENT: %v", err)
	ce := toConnect(zap.NewNop(), "/jq.v1.Test/Fuzz", err)
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(ce))
	var e *connect.Error
	require.True(t, errors.As(ce, &e))
	require.NotContains(t, e.Message(), "\n", "the client gets one line")
	require.LessOrEqual(t, len(e.Message()), 200, "the message stays short: %s", e.Message())
	require.True(t, utf8.ValidString(e.Message()))
}

// Worker registration is the other trust boundary of the worker protocol: whatever a worker sends
// is refused with INVALID_ARGUMENT or fits every documented bound (no control character reaches a
// terminal, no NUL reaches Postgres).
func FuzzRegisterParams(f *testing.F) {
	f.Add("host-1-4242", "host-1", int32(4), "default", "emails", "v1.2.3", "team", "a")
	f.Add("", "", int32(0), "", "", "", "", "")
	f.Add("w 1", "h\x00st", int32(1025), "Bad Queue", "default", "1\n2", "", "v")
	f.Add("w", "\x1b]0;pwned\x07", int32(1), "q", "q", "\u009b31m", "k\x00", "v")
	f.Fuzz(func(t *testing.T, id, host string, concurrency int32, q1, q2, version, labelK, labelV string) {
		req := &jqv1.RegisterWorkerRequest{WorkerId: id, Hostname: host, Concurrency: concurrency, Version: version}
		for _, q := range []string{q1, q2} {
			if q != "" {
				req.Queues = append(req.Queues, q)
			}
		}
		if labelK != "" || labelV != "" {
			req.Labels = map[string]string{labelK: labelV}
		}
		p, err := registerParams(req)
		if err != nil {
			requireRefusal(t, err)
			return
		}
		require.NoError(t, p.Validate())
		require.True(t, len(p.ID) >= 1 && len(p.ID) <= store.MaxWorkerIDLen)
		for _, s := range []string{p.ID, p.Hostname, p.Version} {
			require.True(t, utf8.ValidString(s))
			require.Equal(t, -1, strings.IndexFunc(s, unicode.IsControl), "%q", s)
		}
		require.True(t, p.Concurrency >= 1 && p.Concurrency <= store.MaxWorkerConcurrency)
		require.True(t, len(p.Queues) >= 1 && len(p.Queues) <= store.MaxWorkerQueues)
		for i, q := range p.Queues {
			require.NoError(t, queue.ValidateQueueName(q))
			require.NotContains(t, p.Queues[:i], q, "no duplicates")
		}
	})
}

// The JSON codec decodes untrusted bytes: it never panics, refuses with INVALID_ARGUMENT, and what
// it accepts holds no enum value given by an unknown name (ListJobs' states in particular).
func FuzzJSONCodec(f *testing.F) {
	f.Add([]byte(`{"queue":"default","states":["JOB_STATE_PENDING",5],"pageSize":10}`))
	f.Add([]byte(`{"states":["JOB_STATE_BOGUS"]}`))
	f.Add([]byte(`{"states":[99],"future_field":{"x":[1,2]}}`))
	f.Add([]byte(`{"labels":{"a":"b"},"page_token":"x"}`))
	f.Add([]byte(`{"states":"JOB_STATE_PENDING"}`))
	f.Add([]byte(`[1,2`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m jqv1.ListJobsRequest
		err := jsonCodec{name: "json"}.Unmarshal(data, &m)
		if err != nil {
			require.NotContains(t, err.Error(), "\n")
			require.LessOrEqual(t, len(err.Error()), 300, err.Error())
			if errors.Is(err, queue.ErrInvalidArgument) {
				requireRefusal(t, err)
			}
			return
		}
		for _, st := range m.GetStates() {
			_, known := jqv1.JobState_name[int32(st)]
			if !known {
				// Only a number can carry an unknown value; listParams refuses it.
				_, err := listParams(&m)
				requireRefusal(t, err)
			}
		}
	})
}

// A worker's failure text: the reason is a short machine word or refused; the error is cut to the
// limit and stays valid UTF-8.
func FuzzFailureText(f *testing.F) {
	f.Add("error", "boom")
	f.Add("output_too_large", strings.Repeat("é", 3000))
	f.Add("Bad Reason", "\xff\xfe")
	f.Fuzz(func(t *testing.T, reason, msg string) {
		if store.ValidFailureReason(reason) {
			require.LessOrEqual(t, len(reason), store.MaxFailureReasonLen)
			require.Equal(t, -1, strings.IndexFunc(reason, func(c rune) bool {
				return (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_'
			}))
		}
		cut := store.JobReportParams{Error: msg}.Bounded().Error // the cut every stored report gets
		require.LessOrEqual(t, len(cut), store.MaxFailureErrorLen)
		if len(msg) <= store.MaxFailureErrorLen {
			require.Equal(t, msg, cut)
		} else if utf8.ValidString(msg) {
			require.True(t, utf8.ValidString(cut))
			require.True(t, strings.HasPrefix(msg, strings.TrimSuffix(cut, "…")))
		}
	})
}
