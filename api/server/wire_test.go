package apiserver_test

// The API as plain HTTP clients see it: Connect unary calls with JSON or MessagePack bodies made
// with net/http and generic maps (no generated code), each request and response checked against
// the OpenAPI document the server serves.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	vconfig "github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/content"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/zap/zaptest"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/api/auth"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
)

// httpAPI calls the API with net/http and checks every exchange against the served OpenAPI
// document.
type httpAPI struct {
	t     *testing.T
	base  string // http://host:port
	token string // sent as Authorization: Bearer when set
	http  *http.Client
	spec  validator.Validator
}

func newHTTPAPI(t *testing.T, addr string) *httpAPI {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	a := &httpAPI{t: t, base: "http://" + addr, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
	doc, err := libopenapi.NewDocument(a.get("/openapi.yaml"))
	require.NoError(t, err)
	v, errs := validator.NewValidator(doc, vconfig.WithBodyDecoder("application/msgpack", content.DecoderFunc(msgpackAsJSON)))
	require.Empty(t, errs)
	ok, verrs := v.ValidateDocument()
	require.True(t, ok, "the served OpenAPI document is invalid: %v", verrs)
	a.spec = v
	return a
}

// msgpackAsJSON decodes a MessagePack body for the validator into the JSON value it stands for:
// bin as base64, the timestamp extension as an RFC 3339 string.
func msgpackAsJSON(in *content.DecodeInput) (any, error) {
	var v any
	if err := msgpack.NewDecoder(in.Body).Decode(&v); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}

func (a *httpAPI) get(path string) []byte {
	a.t.Helper()
	res, err := a.http.Get(a.base + path)
	require.NoError(a.t, err)
	defer res.Body.Close()
	require.Equal(a.t, http.StatusOK, res.StatusCode)
	b, err := io.ReadAll(res.Body)
	require.NoError(a.t, err)
	return b
}

// call posts body to /<procedure> as contentType and returns the status and response body,
// after validating both against the OpenAPI document.
func (a *httpAPI) call(procedure, contentType string, body []byte) (int, []byte) {
	a.t.Helper()
	return a.exchange(procedure, contentType, body, true)
}

// callInvalid is call for a request the document does not allow: only the response is checked.
func (a *httpAPI) callInvalid(procedure, contentType string, body []byte) (int, []byte) {
	a.t.Helper()
	return a.exchange(procedure, contentType, body, false)
}

func (a *httpAPI) exchange(procedure, contentType string, body []byte, validRequest bool) (int, []byte) {
	a.t.Helper()
	newReq := func() *http.Request {
		req, err := http.NewRequest(http.MethodPost, a.base+"/"+procedure, bytes.NewReader(body))
		require.NoError(a.t, err)
		req.Header.Set("Content-Type", contentType)
		if a.token != "" {
			req.Header.Set("Authorization", "Bearer "+a.token)
		}
		return req
	}
	res, err := a.http.Do(newReq())
	require.NoError(a.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(a.t, err)

	checked := &http.Response{StatusCode: res.StatusCode, Header: res.Header, Body: io.NopCloser(bytes.NewReader(b))}
	validate := a.spec.ValidateHttpResponse
	if validRequest {
		validate = a.spec.ValidateHttpRequestResponse
	}
	ok, verrs := validate(newReq(), checked)
	require.True(a.t, ok, "%s %s: not as the OpenAPI document says: %s\nbody: %q", procedure, contentType, describe(verrs), b)
	return res.StatusCode, b
}

func describe(errs any) string {
	b, _ := json.Marshal(errs)
	return string(b)
}

// jsonCall makes a Connect unary call with a JSON body and decodes the 200 response.
func (a *httpAPI) jsonCall(procedure, body string) map[string]json.RawMessage {
	a.t.Helper()
	status, b := a.call(procedure, "application/json", []byte(body))
	require.Equal(a.t, http.StatusOK, status, "%s", b)
	var out map[string]json.RawMessage
	require.NoError(a.t, json.Unmarshal(b, &out))
	return out
}

// packCall makes a Connect unary call with a MessagePack body and decodes the 200 response.
func (a *httpAPI) packCall(procedure string, body map[string]any) map[string]any {
	a.t.Helper()
	status, b := a.packCallStatus(procedure, body)
	require.Equal(a.t, http.StatusOK, status, "%s", b)
	var out map[string]any
	require.NoError(a.t, msgpack.Unmarshal(b, &out))
	return out
}

func (a *httpAPI) packCallStatus(procedure string, body map[string]any) (int, []byte) {
	a.t.Helper()
	in, err := msgpack.Marshal(body)
	require.NoError(a.t, err)
	return a.call(procedure, "application/msgpack", in)
}

// packCallInvalid is packCallStatus for a request the document does not allow.
func (a *httpAPI) packCallInvalid(procedure string, body map[string]any) (int, []byte) {
	a.t.Helper()
	in, err := msgpack.Marshal(body)
	require.NoError(a.t, err)
	return a.callInvalid(procedure, "application/msgpack", in)
}

// serveHTTP serves the API as setup does and returns its plain-HTTP view and a Go client.
func serveHTTP(t *testing.T, opts apiserver.Options) (*httpAPI, *rpcclient.Client) {
	t.Helper()
	addr := serveAddr(t, opts)
	cl, err := rpcclient.New(rpcclient.Options{Addr: addr})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return newHTTPAPI(t, addr), cl
}

// setupHTTP runs an engine over a database of the test's own and serves the API on it, as
// setupEngine does; it returns the bundle (its Go client included) and the plain-HTTP view.
func setupHTTP(t *testing.T) (*bundle, *httpAPI) {
	t.Helper()
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, eng := runEngine(ctx, t, engine.Options{ReaperInterval: 100 * time.Millisecond})
	b := newBundle(t, st)
	b.eng = eng
	var h *httpAPI
	h, b.cl = serveHTTP(t, apiserver.Options{
		Store: st, Engine: eng, Log: zaptest.NewLogger(t), Limits: apiserver.Limits{MaxPayloadBytes: 1 << 20},
		Workers: apiserver.WorkerTiming{HeartbeatInterval: time.Second, HeartbeatTimeout: 10 * time.Second},
	})
	return b, h
}

// A JSON client writes payloads as JSON values and reads them back as JSON values; base64
// strings keep working and binary payloads come back as base64.
func TestJSONPayloadsAsValues(t *testing.T) {
	b, h := setupHTTP(t)
	cl := b.cl

	submit := func(payload string) string {
		res := h.jsonCall("jq.v1.JobService/SubmitJob",
			fmt.Sprintf(`{"job":{"queue":%q,"type":"noop","payload":%s}}`, b.queue, payload))
		var id string
		require.NoError(t, json.Unmarshal(res["jobId"], &id))
		return id
	}
	getPayload := func(id string) (json.RawMessage, []byte) {
		res := h.jsonCall("jq.v1.JobService/GetJob", fmt.Sprintf(`{"jobId":%q}`, id))
		var job map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(res["job"], &job))
		g, err := cl.Jobs.GetJob(b.ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: id}))
		require.NoError(t, err)
		return job["payload"], g.Msg.GetJob().GetPayload()
	}

	id := submit(`{"a":1}`)
	js, stored := getPayload(id)
	require.Equal(t, `{"a":1}`, string(js))
	require.Equal(t, `{"a":1}`, string(stored), "the payload is the JSON text as written")

	id = submit(` [1, {"b": [true, null]}] `)
	js, stored = getPayload(id)
	require.Equal(t, `[1, {"b": [true, null]}]`, string(js))
	require.Equal(t, `[1, {"b": [true, null]}]`, string(stored))

	id = submit(`42`)
	js, _ = getPayload(id)
	require.Equal(t, `42`, string(js))

	id = submit(`"aGk="`) // a string is base64, as in proto3 JSON
	js, stored = getPayload(id)
	require.Equal(t, "hi", string(stored))
	require.Equal(t, `"aGk="`, string(js), "text that is not JSON comes back as base64")

	id = submit(`"eyJ4IjoxfQ=="`) // base64 of {"x":1}
	js, _ = getPayload(id)
	require.Equal(t, `{"x":1}`, string(js), "JSON bytes come back as a value however they were sent")

	res, err := cl.Jobs.SubmitJob(b.ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: &jqv1.JobSpec{
		Queue: b.queue, Type: "noop", Payload: []byte{0xff, 0x00, 0x01}}}))
	require.NoError(t, err)
	js, _ = getPayload(res.Msg.GetJobId())
	require.Equal(t, `"/wAB"`, string(js), "binary payloads are base64")

	// A malformed value is the JSON codec's usual INVALID_ARGUMENT, as a JSON error body.
	status, body := h.callInvalid("jq.v1.JobService/SubmitJob", "application/json",
		[]byte(fmt.Sprintf(`{"job":{"queue":%q,"type":"noop","payload":{"a":}}}`, b.queue)))
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, string(body), `"code":"invalid_argument"`)
}

// A client that speaks only MessagePack (net/http and generic maps) submits a job, sees a real
// worker finish it, fetches its result, cancels another job and lists the queue.
func TestMessagePackClient(t *testing.T) {
	b, h := setupHTTP(t)

	// The worker decodes the payload as MessagePack and answers in MessagePack.
	mux := queue.NewMux()
	mux.RegisterFunc("add", func(_ context.Context, j *queue.Job) ([]byte, error) {
		var in map[string]int
		if err := msgpack.Unmarshal(j.Payload, &in); err != nil {
			return nil, err
		}
		return msgpack.Marshal(map[string]any{"sum": in["a"] + in["b"]})
	})
	b.startWorker(mux)

	res := h.packCall("jq.v1.JobService/SubmitJob", map[string]any{"job": map[string]any{
		"queue": b.queue, "type": "add", "payload": map[string]any{"a": 1, "b": 2}, "keepResult": true,
		"labels": map[string]any{"via": "msgpack"}, "timeout": "10s",
	}})
	id, _ := res["jobId"].(string)
	require.NotEmpty(t, id)

	var job map[string]any
	testenv.Eventually(t, 20*time.Second, func() error {
		job, _ = h.packCall("jq.v1.JobService/GetJob", map[string]any{"jobId": id})["job"].(map[string]any)
		if job["state"] != "JOB_STATE_DONE" {
			return fmt.Errorf("job is %v", job["state"])
		}
		return nil
	})
	require.Equal(t, id, job["id"])
	require.Equal(t, "10s", job["timeout"])
	require.Equal(t, map[string]any{"via": "msgpack"}, job["labels"])
	payload, ok := job["payload"].([]byte)
	require.True(t, ok, "payload is bin: %T", job["payload"])
	var args map[string]any
	require.NoError(t, msgpack.Unmarshal(payload, &args), "the map payload was stored as its MessagePack")
	require.EqualValues(t, map[string]any{"a": int8(1), "b": int8(2)}, args)
	_, err := time.Parse(time.RFC3339Nano, job["createdAt"].(string))
	require.NoError(t, err, "timestamps are RFC 3339 strings")

	result := h.packCall("jq.v1.JobService/GetJobResult", map[string]any{"jobId": id, "consume": true})
	require.Equal(t, true, result["found"])
	require.Equal(t, "JOB_STATE_DONE", result["state"])
	var out map[string]any
	require.NoError(t, msgpack.Unmarshal(result["result"].(map[string]any)["data"].([]byte), &out))
	require.EqualValues(t, 3, out["sum"])
	result = h.packCall("jq.v1.JobService/GetJobResult", map[string]any{"jobId": id})
	require.Nil(t, result["found"], "consumed: found is false, left out like every unpopulated field")

	// A job due in an hour (the timestamp extension) stays PENDING; cancelling dead-letters it.
	res = h.packCall("jq.v1.JobService/SubmitJob", map[string]any{"job": map[string]any{
		"queue": b.queue, "type": "add", "runAt": time.Now().Add(time.Hour), "payload": []byte{0xff},
	}})
	later, _ := res["jobId"].(string)
	cancelled := h.packCall("jq.v1.JobService/CancelJob", map[string]any{"jobId": later})
	job, _ = cancelled["job"].(map[string]any)
	require.Equal(t, "JOB_STATE_DEAD_LETTERED", job["state"])
	require.Equal(t, "cancelled", job["failureReason"])
	require.Equal(t, []byte{0xff}, job["payload"])

	list := h.packCall("jq.v1.JobService/ListJobs", map[string]any{
		"queue": b.queue, "states": []any{"JOB_STATE_DONE", "JOB_STATE_DEAD_LETTERED"}, "pageSize": 10,
	})
	jobs, _ := list["jobs"].([]any)
	require.Len(t, jobs, 2)
	require.Equal(t, later, jobs[0].(map[string]any)["id"], "newest first")
	require.Equal(t, id, jobs[1].(map[string]any)["id"])
	require.Nil(t, jobs[1].(map[string]any)["payload"], "without include_payloads")

	// Errors are the Connect protocol's JSON, whatever the request's encoding.
	status, body := h.packCallStatus("jq.v1.JobService/GetJob", map[string]any{"jobId": "nope"})
	require.Equal(t, http.StatusBadRequest, status)
	var cerr struct{ Code, Message string }
	require.NoError(t, json.Unmarshal(body, &cerr))
	require.Equal(t, "invalid_argument", cerr.Code)
	status, body = h.packCallInvalid("jq.v1.JobService/ListJobs", map[string]any{"states": []any{"JOB_STATE_BOGUS"}})
	require.Equal(t, http.StatusBadRequest, status, "%s", body)
	require.Contains(t, string(body), "JOB_STATE_BOGUS")
}

// The OpenAPI document is served without credentials and is the one generated into api/gen; the
// RPCs it describes still need a token (a producer may list its own jobs).
func TestOpenAPIDocumentIsPublic(t *testing.T) {
	t.Parallel()
	tok, err := auth.NewToken()
	require.NoError(t, err)
	a, err := auth.New(auth.Options{Log: zaptest.NewLogger(t), Tokens: []auth.TokenEntry{
		{Name: "producer", Roles: []auth.Role{auth.RoleProducer}, SHA256: auth.HashToken(tok)}}})
	require.NoError(t, err)
	b := newBundle(t, testStore)
	h := newHTTPAPI(t, serveAddr(t, apiserver.Options{Store: testStore, Log: zaptest.NewLogger(t), Auth: a}))

	require.Equal(t, api.OpenAPI, h.get("/openapi.yaml"))
	res, err := h.http.Get(h.base + "/openapi.yaml")
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, "application/yaml", res.Header.Get("Content-Type"))
	for _, want := range []string{"openapi: 3.1.0", "application/msgpack", "/jq.v1.JobService/SubmitJob:", "bearerAuth"} {
		require.True(t, bytes.Contains(api.OpenAPI, []byte(want)), want)
	}

	body := fmt.Sprintf(`{"queue":%q}`, b.queue)
	status, _ := h.call("jq.v1.JobService/ListJobs", "application/json", []byte(body))
	require.Equal(t, http.StatusUnauthorized, status)
	h.token = tok
	h.jsonCall("jq.v1.JobService/ListJobs", body)
}
