package server

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
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
			require.True(t, errors.Is(err, queue.ErrInvalidArgument), "refused, but not as INVALID_ARGUMENT: %v", err)
			ce := toConnect(zap.NewNop(), "/jq.v1.JobService/SubmitJob", err)
			require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(ce))
			require.NotContains(t, ce.Error(), "\n", "the client gets one line")
			return
		}
		require.NoError(t, queue.ValidateQueueName(p.Queue))
		require.NotEmpty(t, p.Type)
		require.LessOrEqual(t, len(p.Type), maxTypeLen)
		require.True(t, p.Priority >= queue.MinPriority && p.Priority <= queue.MaxPriority)
		require.LessOrEqual(t, len(p.Payload), maxPayload)
		require.True(t, p.TTL >= 0 && p.TTL <= maxTTL)
		require.True(t, p.Timeout >= 0 && p.Timeout <= maxJobTimeout)
		require.False(t, p.RunAt.After(now.Add(maxRunAtAhead)))
		if p.MaxRetries != nil {
			require.True(t, *p.MaxRetries >= 0 && *p.MaxRetries <= maxRetriesLimit)
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
		if validFailureReason(reason) {
			require.LessOrEqual(t, len(reason), maxFailureReason)
			require.Equal(t, -1, strings.IndexFunc(reason, func(c rune) bool {
				return (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_'
			}))
		}
		cut := truncateUTF8(msg, maxFailureError)
		require.LessOrEqual(t, len(cut), maxFailureError)
		if len(msg) <= maxFailureError {
			require.Equal(t, msg, cut)
		} else if utf8.ValidString(msg) {
			require.True(t, utf8.ValidString(cut))
			require.True(t, strings.HasPrefix(msg, strings.TrimSuffix(cut, "…")))
		}
	})
}
