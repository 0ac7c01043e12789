package codec_test

import (
	"encoding/json"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/jq-dev/jq/api/codec"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

func TestUnmarshalJSONTakesValuesForBytes(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		in   string
		want string
	}{
		"object kept verbatim": {`{"job":{"queue":"q","payload": {"a": 1,"b":[true]} }}`, `{"a": 1,"b":[true]}`},
		"array":                {`{"job":{"payload":[1,2]}}`, `[1,2]`},
		"number":               {`{"job":{"payload":-1.5e3}}`, `-1.5e3`},
		"true":                 {`{"job":{"payload":true}}`, `true`},
		"false":                {`{"job":{"payload":false}}`, `false`},
		"string is base64":     {`{"job":{"payload":"aGk="}}`, `hi`},
		"null is empty":        {`{"job":{"payload":null}}`, ``},
		"proto name":           {`{"job":{"payload":{"x":"\u00e9"}}}`, `{"x":"\u00e9"}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var req jqv1.SubmitJobRequest
			require.NoError(t, codec.UnmarshalJSON(protojson.UnmarshalOptions{}, []byte(tc.in), &req))
			require.Equal(t, tc.want, string(req.GetJob().GetPayload()))
		})
	}
}

func TestUnmarshalJSONEveryBytesField(t *testing.T) {
	t.Parallel()
	var batch jqv1.SubmitJobsRequest
	require.NoError(t, codec.UnmarshalJSON(protojson.UnmarshalOptions{},
		[]byte(`{"jobs":[{"payload":{"i":0}},{"payload":"AAE="},{"payload":[1]}]}`), &batch))
	require.Equal(t, `{"i":0}`, string(batch.GetJobs()[0].GetPayload()))
	require.Equal(t, []byte{0, 1}, batch.GetJobs()[1].GetPayload())
	require.Equal(t, `[1]`, string(batch.GetJobs()[2].GetPayload()))

	var rep jqv1.ReportJobsRequest
	require.NoError(t, codec.UnmarshalJSON(protojson.UnmarshalOptions{},
		[]byte(`{"reports":[{"success":{"result":{"ok":true}}}]}`), &rep))
	require.Equal(t, `{"ok":true}`, string(rep.GetReports()[0].GetSuccess().GetResult()))
}

func TestUnmarshalJSONMalformedStaysAnError(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`{"job":{"payload":{"a":}}}`, `{"job":{"payload":{}`, `{"job":[]}`, `[`, `{"job":{"payload":nul}}`} {
		var req jqv1.SubmitJobRequest
		require.Error(t, codec.UnmarshalJSON(protojson.UnmarshalOptions{}, []byte(in), &req), in)
	}
}

func TestMarshalJSONWritesValues(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		payload []byte
		want    string // the JSON of "payload"
	}{
		"object":              {[]byte(`{"a":1}`), `{"a":1}`},
		"array with spaces":   {[]byte(`[1, 2]`), `[1, 2]`},
		"number":              {[]byte(`42`), `42`},
		"bool":                {[]byte(`true`), `true`},
		"binary":              {[]byte{0xff, 0x00, 0x7b}, `"/wB7"`},
		"json string":         {[]byte(`"s"`), `"InMi"`},
		"null":                {[]byte(`null`), `"bnVsbA=="`},
		"trailing whitespace": {[]byte("{}\n"), `"e30K"`},
		"leading whitespace":  {[]byte(" {}"), `"IHt9"`},
		"invalid json":        {[]byte(`{a}`), `"e2F9"`},
		"invalid utf-8":       {[]byte("[\"\xff\"]"), `"WyL/Il0="`},
		"text":                {[]byte(`hello`), `"aGVsbG8="`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resp := &jqv1.GetJobResponse{Job: &jqv1.Job{Id: "x", Payload: tc.payload,
				Result: &jqv1.JobResult{Data: tc.payload}}}
			b, err := codec.MarshalJSON(protojson.MarshalOptions{}, resp)
			require.NoError(t, err)
			var doc struct {
				Job struct {
					Payload json.RawMessage `json:"payload"`
					Result  struct {
						Data json.RawMessage `json:"data"`
					} `json:"result"`
				} `json:"job"`
			}
			require.NoError(t, json.Unmarshal(b, &doc), string(b))
			require.JSONEq(t, tc.want, string(doc.Job.Payload))
			require.JSONEq(t, tc.want, string(doc.Job.Result.Data))

			// Round trip: what the server writes, a client sends back and gets the same bytes.
			var back jqv1.GetJobResponse
			require.NoError(t, codec.UnmarshalJSON(protojson.UnmarshalOptions{}, b, &back))
			require.True(t, proto.Equal(resp, &back), "%s", b)
		})
	}
}

func TestMarshalJSONMultilineIsIndented(t *testing.T) {
	t.Parallel()
	b, err := codec.MarshalJSON(protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true},
		&jqv1.Job{Id: "x", Payload: []byte(`{"a":[1]}`)})
	require.NoError(t, err)
	require.Equal(t, "{\n  \"id\": \"x\",\n  \"payload\": {\n    \"a\": [\n      1\n    ]\n  }\n}", string(b))
}

func FuzzJSONBytesRule(f *testing.F) {
	for _, s := range []string{`{}`, `[1]`, `"x"`, `1`, "\xff", ` {}`, `{"a":"b"}`, `null`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		in := &jqv1.SubmitJobsRequest{Jobs: []*jqv1.JobSpec{{Queue: "q", Payload: payload}, {Payload: payload}}}
		b, err := codec.MarshalJSON(protojson.MarshalOptions{}, in)
		require.NoError(t, err)
		require.True(t, json.Valid(b), "%q", b)
		var back jqv1.SubmitJobsRequest
		require.NoError(t, codec.UnmarshalJSON(protojson.UnmarshalOptions{}, b, &back), "%s", b)
		require.True(t, proto.Equal(in, &back), "%s", b)
		// Arbitrary bytes as a request body never panic.
		var req jqv1.SubmitJobRequest
		_ = codec.UnmarshalJSON(protojson.UnmarshalOptions{}, payload, &req)
	})
}

// TestMarshalJSONAsTheRewriteDid: the single-pass MarshalJSON writes what protojson followed by
// BytesAsValues writes, for bytes fields in messages, lists and maps, with every option the
// callers use; and it allocates about its output's size for a page of large payloads.
func TestMarshalJSONAsTheRewriteDid(t *testing.T) {
	t.Parallel()
	payloads := [][]byte{nil, {}, []byte(`{"a":[1,{"b":"c"}]}`), {0, 1, 2, 0xff}, []byte(`"s"`), []byte(`7`), []byte(" {}")}
	var jobs []*jqv1.Job
	for i, p := range payloads {
		jobs = append(jobs, &jqv1.Job{Id: string(rune('a' + i)), Payload: p, Labels: map[string]string{"k": `"` + "AAAA"},
			Result: &jqv1.JobResult{Data: payloads[(i+1)%len(payloads)]}})
	}
	msgs := []proto.Message{
		&jqv1.ListJobsResponse{Jobs: jobs, NextPageToken: "t"},
		&jqv1.SubmitJobsRequest{Jobs: []*jqv1.JobSpec{{Queue: "q", Payload: []byte(`[1]`)}, {Payload: []byte("x")}}},
		&jqv1.Job{Id: "no bytes"},
	}
	for _, opts := range []protojson.MarshalOptions{{}, {EmitUnpopulated: true, UseProtoNames: true},
		{Multiline: true, Indent: "  ", EmitUnpopulated: true, UseProtoNames: true}} {
		for _, m := range msgs {
			b, err := codec.MarshalJSON(opts, m)
			require.NoError(t, err)
			plain, err := opts.Marshal(m)
			require.NoError(t, err)
			want := codec.BytesAsValues(plain, m.ProtoReflect().Descriptor())
			var got, exp any
			require.NoError(t, json.Unmarshal(b, &got), "%s", b)
			require.NoError(t, json.Unmarshal(want, &exp))
			require.Equal(t, exp, got)
			if !opts.Multiline {
				require.Equal(t, string(want), string(b))
			}
		}
	}
}

// TestMarshalJSONAllocatesItsOutput: a page of large payloads costs about its output's size in
// allocations (the rewrite after protojson cost 23 times it). Not parallel: it reads the process's
// allocation counter.
func TestMarshalJSONAllocatesItsOutput(t *testing.T) {
	big := make([]byte, 512<<10)
	page := &jqv1.ListJobsResponse{}
	for range 8 {
		page.Jobs = append(page.Jobs, &jqv1.Job{Id: "x", Payload: big}, &jqv1.Job{Id: "y", Payload: []byte(`{"a":"` + string(big[:1000]) + `"}`)})
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b, err := codec.MarshalJSON(protojson.MarshalOptions{}, page)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("output %d bytes, allocated %d (%.2f×)", len(b), allocated, float64(allocated)/float64(len(b)))
	require.Less(t, allocated, uint64(2*len(b)))
}

// BenchmarkMarshalJSONPage encodes a ListJobs page of 4 MiB of payloads (docs/security.md, attack 7).
func BenchmarkMarshalJSONPage(b *testing.B) {
	page := &jqv1.ListJobsResponse{}
	for range 8 {
		page.Jobs = append(page.Jobs, &jqv1.Job{Id: "x", Payload: make([]byte, 512<<10)})
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := codec.MarshalJSON(protojson.MarshalOptions{}, page)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(out)))
	}
}
