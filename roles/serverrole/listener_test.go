package serverrole

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests serve real Connect handlers (a unary SubmitJob and a server-streaming StreamJobs) with
// newAPIServer and one-second bounds, and talk to them as clients do: raw TCP, h2c gRPC and HTTP/1.1
// Connect.

const bound = time.Second // every grpc.*_timeout_s of these tests

type fakeJobs struct {
	jqv1connect.UnimplementedJobServiceHandler
}

func (fakeJobs) SubmitJob(context.Context, *connect.Request[jqv1.SubmitJobRequest]) (*connect.Response[jqv1.SubmitJobResponse], error) {
	return connect.NewResponse(&jqv1.SubmitJobResponse{JobId: "accepted"}), nil
}

// fakeWorkers' StreamJobs sends one message, stays silent past every bound, then sends another.
type fakeWorkers struct {
	jqv1connect.UnimplementedWorkerServiceHandler
	silence time.Duration
}

func (f fakeWorkers) StreamJobs(ctx context.Context, _ *connect.Request[jqv1.StreamJobsRequest], s *connect.ServerStream[jqv1.StreamJobsResponse]) error {
	for i := range 2 {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(f.silence): // the point of the test: time passes with nothing sent
			}
		}
		if err := s.Send(&jqv1.StreamJobsResponse{}); err != nil {
			return err
		}
	}
	return nil
}

// startAPI serves the fake services on a loopback port and returns its address.
func startAPI(t *testing.T) string {
	t.Helper()
	cfg := config.Default().GRPC
	cfg.ReadHeaderTimeoutS, cfg.IdleTimeoutS, cfg.ReadBodyTimeoutS = 1, 1, 1
	mux := http.NewServeMux()
	mux.Handle(jqv1connect.NewJobServiceHandler(fakeJobs{}))
	mux.Handle(jqv1connect.NewWorkerServiceHandler(fakeWorkers{silence: 3 * bound}))
	srv := newAPIServer(cfg, mux, nil, zaptest.NewLogger(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return ln.Addr().String()
}

// waitClosed reads c until the server closes it, and fails if that takes 10 bounds. It returns what
// was read.
func waitClosed(t *testing.T, c net.Conn) []byte {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*bound)))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %s", 10*bound)
	}
	return b
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

func TestAPIServerClosesSilentConnections(t *testing.T) {
	t.Parallel()
	addr := startAPI(t)

	t.Run("raw TCP sends nothing", func(t *testing.T) {
		t.Parallel()
		c := dial(t, addr)
		waitClosed(t, c)
	})

	t.Run("h2c preface then silence", func(t *testing.T) {
		t.Parallel()
		c := dial(t, addr)
		_, err := io.WriteString(c, h2Preface+"\x00\x00\x00\x04\x00\x00\x00\x00\x00") // + empty SETTINGS
		require.NoError(t, err)
		start := time.Now()
		frames := h2FrameTypes(t, waitClosed(t, c))
		require.Contains(t, frames, byte(0x7), "the server says GOAWAY before it closes an idle connection")
		require.GreaterOrEqual(t, time.Since(start), bound/2, "closed as idle, not refused")
	})

	t.Run("HTTP/1.1 keep-alive between requests", func(t *testing.T) {
		t.Parallel()
		c := dial(t, addr)
		_, err := io.WriteString(c, "GET /nothing HTTP/1.1\r\nHost: jq\r\n\r\n")
		require.NoError(t, err)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		require.NotEqual(t, "close", resp.Header.Get("Connection"), "kept alive after the request")
		waitClosed(t, c)
	})
}

// h2FrameTypes lists the types of the HTTP/2 frames in b (a server's side of a connection).
func h2FrameTypes(t *testing.T, b []byte) []byte {
	t.Helper()
	var types []byte
	for len(b) >= 9 {
		n := int(binary.BigEndian.Uint32(append([]byte{0}, b[:3]...)))
		types = append(types, b[3])
		require.GreaterOrEqual(t, len(b), 9+n, "truncated frame")
		b = b[9+n:]
	}
	return types
}

// trickle is a request body that sends prefix, then one byte every 100 ms, for up to 30 bounds,
// until the test ends.
func trickle(t *testing.T, prefix []byte) io.Reader {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := pw.Write(prefix); err != nil {
			return
		}
		for range 300 {
			if _, err := pw.Write([]byte{0}); err != nil {
				return
			}
			time.Sleep(bound / 10)
		}
		_ = pw.Close()
	}()
	t.Cleanup(func() { _ = pr.Close(); <-done })
	return pr
}

func TestAPIServerCutsSlowRequestBody(t *testing.T) {
	t.Parallel()
	addr := startAPI(t)
	url := "http://" + addr + jqv1connect.JobServiceSubmitJobProcedure

	t.Run("Connect over HTTP/1.1", func(t *testing.T) {
		t.Parallel()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, trickle(t, nil))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/proto")
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode) // Connect's resource_exhausted
		var body struct{ Code, Message string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		require.Equal(t, "resource_exhausted", body.Code)
		require.Contains(t, body.Message, "request body not received within 1s (grpc.read_body_timeout_s)")
	})

	t.Run("gRPC over h2c", func(t *testing.T) {
		t.Parallel()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, trickle(t, []byte{0, 0, 0, 4, 0})) // a 1 KiB message
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		resp, err := h2cClient().Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		_, _ = io.Copy(io.Discard, resp.Body)
		status := resp.Header.Get("Grpc-Status") + resp.Trailer.Get("Grpc-Status")
		msg := resp.Header.Get("Grpc-Message") + resp.Trailer.Get("Grpc-Message")
		require.Equal(t, "8", status, "RESOURCE_EXHAUSTED")
		require.Contains(t, msg, "request body not received within 1s (grpc.read_body_timeout_s)")
	})

	t.Run("a body that arrives in time is served", func(t *testing.T) {
		t.Parallel()
		cl := jqv1connect.NewJobServiceClient(h2cClient(), "http://"+addr, connect.WithGRPC())
		resp, err := cl.SubmitJob(t.Context(), connect.NewRequest(&jqv1.SubmitJobRequest{}))
		require.NoError(t, err)
		require.Equal(t, "accepted", resp.Msg.GetJobId())
	})
}

func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p}}
}

// A worker's assignment stream outlives the idle and body bounds several times over, over gRPC on
// h2c as workers use it, and over Connect on HTTP/1.1.
func TestAPIServerKeepsStreamsOpen(t *testing.T) {
	t.Parallel()
	addr := startAPI(t)
	for name, cl := range map[string]jqv1connect.WorkerServiceClient{
		"gRPC over h2c":         jqv1connect.NewWorkerServiceClient(h2cClient(), "http://"+addr, connect.WithGRPC()),
		"Connect over HTTP/1.1": jqv1connect.NewWorkerServiceClient(&http.Client{Transport: &http.Transport{}}, "http://"+addr),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stream, err := cl.StreamJobs(t.Context(), connect.NewRequest(&jqv1.StreamJobsRequest{WorkerId: "w"}))
			require.NoError(t, err)
			defer func() { _ = stream.Close() }()
			start := time.Now()
			n := 0
			for stream.Receive() {
				n++
			}
			require.NoError(t, stream.Err())
			require.Equal(t, 2, n)
			// The server was silent for 3 bounds; its clock started before ours (the first message
			// may be what returns StreamJobs), so allow one bound for that.
			require.GreaterOrEqual(t, time.Since(start), 2*bound, "the second message came after the silence")
			require.False(t, strings.Contains(stream.ResponseHeader().Get("Connection"), "close"))
		})
	}
}
