package codec_test

import (
	"encoding/json"
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
