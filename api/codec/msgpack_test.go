package codec_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jq-dev/jq/api/codec"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

func mustPack(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestMsgPackRoundTrip(t *testing.T) {
	t.Parallel()
	msgs := []proto.Message{
		&jqv1.GetJobResponse{Job: &jqv1.Job{
			Id: "id", Queue: "q", Payload: []byte{0, 1, 2}, Priority: 9, State: jqv1.JobState_JOB_STATE_DONE,
			Ttl: durationpb.New(1500 * time.Millisecond), NotBefore: timestamppb.New(time.Unix(1700000000, 5).UTC()),
			Labels: map[string]string{"b": "2", "a": "1"}, KeepResult: true,
			Result: &jqv1.JobResult{Data: []byte(`{"x":1}`), ChecksumSha256: "ab"},
		}},
		&jqv1.ListJobsRequest{States: []jqv1.JobState{jqv1.JobState_JOB_STATE_FAILED, 42}, PageSize: -3},
		&jqv1.ReportJobsRequest{WorkerId: "w", Reports: []*jqv1.JobReport{{JobId: "j", Outcome: &jqv1.JobReport_Success{
			Success: &jqv1.JobSuccess{Result: []byte("r")}}}}},
		&jqv1.CreateQueueRequest{Name: "q", PriorityWeights: map[int32]int32{9: 10, 0: 1}},
		&jqv1.SubmitJobResponse{},
	}
	for _, m := range msgs {
		b, err := codec.MsgPack{}.Marshal(m)
		require.NoError(t, err)
		back := m.ProtoReflect().New().Interface()
		require.NoError(t, codec.MsgPack{}.Unmarshal(b, back))
		require.True(t, proto.Equal(m, back), "%T", m)
	}
}

func TestMsgPackShape(t *testing.T) {
	t.Parallel()
	b, err := codec.MsgPack{}.Marshal(&jqv1.GetJobResultResponse{Found: true, State: jqv1.JobState_JOB_STATE_DONE,
		Result: &jqv1.JobResult{Data: []byte("42"), Runtime: durationpb.New(2 * time.Second),
			CompletedAt: timestamppb.New(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))}})
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, msgpack.Unmarshal(b, &v))
	require.Equal(t, map[string]any{
		"found": true,
		"state": "JOB_STATE_DONE",
		"result": map[string]any{
			"data": []byte("42"), "runtime": "2s", "completedAt": "2026-11-23T10:00:00Z",
		},
	}, v)
}

func TestMsgPackDecodesHumanForms(t *testing.T) {
	t.Parallel()
	ts := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	body := mustPack(t, map[string]any{
		"job": map[string]any{
			"queue":       "default",
			"type":        "noop",
			"payload":     map[string]any{"a": 1},
			"priority":    "3", // integers may be strings, as in protojson
			"max_retries": 2,   // proto names are accepted
			"timeout":     "1.5s",
			"runAt":       ts, // the timestamp extension
			"labels":      map[string]any{"k": "v"},
			"unknown":     []any{[]any{map[string]any{"deep": 1}}},
			"ttl":         nil,
		},
	})
	var req jqv1.SubmitJobRequest
	require.NoError(t, codec.MsgPack{}.Unmarshal(body, &req))
	j := req.GetJob()
	require.Equal(t, mustPack(t, map[string]any{"a": 1}), j.GetPayload(), "a map payload is kept as its MessagePack")
	require.EqualValues(t, 3, j.GetPriority())
	require.EqualValues(t, 2, j.GetMaxRetries())
	require.Equal(t, 1500*time.Millisecond, j.GetTimeout().AsDuration())
	require.True(t, ts.Equal(j.GetRunAt().AsTime()))
	require.Equal(t, map[string]string{"k": "v"}, j.GetLabels())
	require.Nil(t, j.GetTtl())

	require.NoError(t, codec.MsgPack{}.Unmarshal(mustPack(t, map[string]any{"job": map[string]any{"payload": []byte{1}}}), &req))
	require.Equal(t, []byte{1}, req.GetJob().GetPayload(), "bin is the bytes themselves")
}

func TestMsgPackRefuses(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]any{
		"not a map":         []any{1},
		"unknown enum name": map[string]any{"states": []any{"JOB_STATE_BOGUS"}},
		"wrong type":        map[string]any{"pageSize": "x"},
		"int32 overflow":    map[string]any{"pageSize": int64(1) << 40},
		"bool for int":      map[string]any{"pageSize": true},
		"str for bool":      map[string]any{"includePayloads": "yes"},
		"labels not map":    map[string]any{"labels": "a"},
		"non-str key":       map[any]any{1: 2},
		"given twice":       map[string]any{"queue": "a", "queue_": nil}, // replaced below
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			body := mustPack(t, v)
			if name == "given twice" {
				body = []byte{0x82, 0xa5, 'q', 'u', 'e', 'u', 'e', 0xa1, 'a', 0xa5, 'q', 'u', 'e', 'u', 'e', 0xa1, 'b'}
			}
			require.Error(t, codec.MsgPack{}.Unmarshal(body, &jqv1.ListJobsRequest{}))
		})
	}
	require.Error(t, codec.MsgPack{}.Unmarshal(nil, &jqv1.ListJobsRequest{}))
	require.Error(t, codec.MsgPack{}.Unmarshal(append(mustPack(t, map[string]any{}), 0xc0), &jqv1.ListJobsRequest{}), "trailing bytes")
	require.Error(t, codec.MsgPack{}.Unmarshal([]byte{0x81, 0xa3, 'j', 'o', 'b', 0x81}, &jqv1.SubmitJobRequest{}), "truncated")
	require.Error(t, codec.MsgPack{}.Unmarshal(mustPack(t, map[string]any{"reports": []any{
		map[string]any{"success": map[string]any{}, "failure": map[string]any{}}}}), &jqv1.ReportJobsRequest{}), "two oneof members")
}

func TestMsgPackSkipsDeepNestingWithoutRecursion(t *testing.T) {
	t.Parallel()
	const depth = 1 << 20
	body := []byte{0x81, 0xa7, 'u', 'n', 'k', 'n', 'o', 'w', 'n'}
	for range depth {
		body = append(body, 0x91) // fixarray of one
	}
	body = append(body, 0xc0)
	require.NoError(t, codec.MsgPack{}.Unmarshal(body, &jqv1.ListJobsRequest{}))
}

// allocCap is what decoding any input may allocate: a fixed multiple of its size plus a
// constant for the message structs and the decoder. A decoder that trusts a declared length
// blows through it at once (a 45-byte body used to allocate 4 GiB).
func allocCap(n int) uint64 { return 64*uint64(n) + 256<<10 }

// allocated reports the bytes f allocates. The fuzz and test binaries run nothing else at the
// same time in these tests (no t.Parallel), so the counter is f's.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// hostileBodies declare lengths far beyond the bytes that follow, in every header that carries
// one: a 4 GiB bin32 payload (the reported 45-byte request), str32, ext32, array32, map32.
func hostileBodies() map[string][]byte {
	job := []byte{0x81, 0xa4, 'j', 'o', 'b', 's', 0x91, 0x82, 0xa5, 'q', 'u', 'e', 'u', 'e', 0xa1, 'q'}
	with := func(key string, tail ...byte) []byte {
		b := append([]byte{}, job...)
		b = append(b, byte(0xa0|len(key)))
		b = append(b, key...)
		return append(b, tail...)
	}
	return map[string][]byte{
		"bin32 4GiB payload": with("payload", 0xc6, 0xff, 0xff, 0xff, 0xf0, 'x'),
		"bin16 payload":      with("payload", 0xc5, 0xff, 0xff, 'x'),
		"str32 type":         with("type", 0xdb, 0xff, 0xff, 0xff, 0xf0, 'x'),
		"array32 labels":     with("unknown", 0xdd, 0xff, 0xff, 0xff, 0xf0, 0xc0),
		"map32 labels":       with("labels", 0xdf, 0xff, 0xff, 0xff, 0xf0, 0xa1, 'a', 0xa1, 'b'),
		"ext32 runAt":        with("runAt", 0xc9, 0xff, 0xff, 0xff, 0xf0, 0xff, 0, 0, 0, 0),
		"ext32 unknown":      with("unknown", 0xc9, 0xff, 0xff, 0xff, 0xf0, 0x05, 0),
		"str32 key":          {0x81, 0xdb, 0x7f, 0xff, 0xff, 0xff, 'j'},
		"map16 top":          {0xde, 0xff, 0xff, 0xa1, 'a', 0xc0},
	}
}

func TestAbuseMsgPackDeclaredLengthsAreBoundedByInput(t *testing.T) {
	for name, body := range hostileBodies() {
		var req jqv1.SubmitJobsRequest
		var err error
		n := allocated(func() { err = codec.MsgPack{}.Unmarshal(body, &req) })
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "malformed MessagePack request", name)
		require.LessOrEqual(t, n, allocCap(len(body)), "%s: %d bytes allocated for a %d-byte body", name, n, len(body))
	}
}

func TestMsgPackTimestampNanosInRange(t *testing.T) {
	// runAt as a 12-byte timestamp extension with 1.5e9 ns: protobuf refuses it, so must this.
	body := []byte{0x81, 0xa5, 'r', 'u', 'n', 'A', 't', 0xc7, 12, 0xff,
		0x59, 0x68, 0x2f, 0x00, 0, 0, 0, 0, 0x65, 0x53, 0xf1, 0x00}
	err := codec.MsgPack{}.Unmarshal(body, &jqv1.JobSpec{})
	require.ErrorContains(t, err, "nanoseconds 1500000000 out of range")
	// The same instant with 5 ns decodes.
	ok := []byte{0x81, 0xa5, 'r', 'u', 'n', 'A', 't', 0xc7, 12, 0xff,
		0, 0, 0, 5, 0, 0, 0, 0, 0x65, 0x53, 0xf1, 0x00}
	var spec jqv1.JobSpec
	require.NoError(t, codec.MsgPack{}.Unmarshal(ok, &spec))
	require.Equal(t, int32(5), spec.GetRunAt().GetNanos())
	require.Equal(t, int64(0x6553f100), spec.GetRunAt().GetSeconds())
}

// FuzzMsgPackDecode decodes arbitrary bytes as the largest request: it must never allocate more
// than allocCap of the input, and whatever decodes must re-encode to the same message.
func FuzzMsgPackDecode(f *testing.F) {
	f.Add([]byte{0x80})
	f.Add([]byte{0x81, 0xa3, 'j', 'o', 'b', 0x81, 0xa7, 'p', 'a', 'y', 'l', 'o', 'a', 'd', 0x91, 0x01})
	for _, b := range hostileBodies() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req jqv1.SubmitJobsRequest
		var err error
		n := allocated(func() { err = codec.MsgPack{}.Unmarshal(data, &req) })
		if n > allocCap(len(data)) {
			t.Fatalf("decoding %d bytes allocated %d (cap %d)", len(data), n, allocCap(len(data)))
		}
		if err != nil {
			return
		}
		// Whatever decodes re-encodes and decodes to the same message.
		b, err := codec.MsgPack{}.Marshal(&req)
		require.NoError(t, err)
		var back jqv1.SubmitJobsRequest
		require.NoError(t, codec.MsgPack{}.Unmarshal(b, &back))
		require.True(t, proto.Equal(&req, &back))
	})
}
