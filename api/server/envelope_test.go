package apiserver_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/server"
)

// envelope frames msg as gRPC, gRPC-Web and Connect streaming do: flags, a big-endian length, the
// message.
func envelope(flags byte, msg []byte) []byte {
	out := make([]byte, 5, 5+len(msg))
	out[0] = flags
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// TestCompressedFlagWithoutEncoding: an envelope with the compressed flag on a request that
// names no message encoding is INVALID_ARGUMENT on every enveloped protocol (connect-go alone
// answers INTERNAL); a request that names its encoding, or sends the flag 0, is served as before.
func TestCompressedFlagWithoutEncoding(t *testing.T) {
	t.Parallel()
	addr := serveAddr(t, apiserver.Options{Store: testStore, Log: zaptest.NewLogger(t)})
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p}
	t.Cleanup(tr.CloseIdleConnections)
	cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	getJob, err := proto.Marshal(&jqv1.GetJobRequest{JobId: uuid.NewString()})
	require.NoError(t, err)
	watchJSON, err := protojson.Marshal(&jqv1.WatchJobRequest{JobId: uuid.NewString()})
	require.NoError(t, err)

	// answer is a response read whole.
	type answer struct {
		StatusCode      int
		Header, Trailer http.Header
	}
	call := func(path, contentType string, header map[string]string, body []byte) (answer, []byte) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Te", "trailers")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := cl.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return answer{StatusCode: res.StatusCode, Header: res.Header, Trailer: res.Trailer}, b
	}
	grpcStatus := func(res answer) string {
		if s := res.Header.Get("Grpc-Status"); s != "" {
			return s // trailers-only
		}
		return res.Trailer.Get("Grpc-Status")
	}

	for _, tc := range []struct {
		name   string
		header map[string]string
		body   []byte
		want   string // grpc-status
	}{
		{"flag without encoding", nil, envelope(1, getJob), "3"},
		{"flag with identity", map[string]string{"Grpc-Encoding": "identity"}, envelope(1, getJob), "3"},
		{"flag with gzip", map[string]string{"Grpc-Encoding": "gzip"}, envelope(1, gzipped(t, getJob)), "5"},
		{"no flag", nil, envelope(0, getJob), "5"},
	} {
		res, body := call("/jq.v1.JobService/GetJob", "application/grpc", tc.header, tc.body)
		require.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", tc.name, body)
		require.Equal(t, tc.want, grpcStatus(res), "%s: %s", tc.name, res.Trailer.Get("Grpc-Message"))
		if tc.want == "3" {
			msg := res.Header.Get("Grpc-Message") + res.Trailer.Get("Grpc-Message")
			require.Contains(t, msg, "compressed flag", tc.name)
		}
	}

	// gRPC-Web carries its status in a trailer frame of the body.
	res, body := call("/jq.v1.JobService/GetJob", "application/grpc-web+proto", nil, envelope(1, getJob))
	require.Equal(t, http.StatusOK, res.StatusCode)
	if s := res.Header.Get("Grpc-Status"); s != "" {
		require.Equal(t, "3", s, "trailers-only") // trailers-only
	} else {
		require.Contains(t, string(body), "grpc-status: 3")
	}

	// Connect streaming (WatchJob) ends its stream with the error as JSON.
	res, body = call("/jq.v1.JobService/WatchJob", "application/connect+json", nil, envelope(1, watchJSON))
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.GreaterOrEqual(t, len(body), 5)
	var end struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body[5:], &end), "%s", body)
	require.Equal(t, "invalid_argument", end.Error.Code, "%s", body)
	require.Contains(t, end.Error.Message, "compressed flag")
	// The same request without the flag reaches the handler: the job does not exist.
	_, body = call("/jq.v1.JobService/WatchJob", "application/connect+json", nil, envelope(0, watchJSON))
	require.Contains(t, string(body), "not_found")
}
