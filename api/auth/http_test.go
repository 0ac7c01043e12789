package auth

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// watchedBody records whether anything read it.
type watchedBody struct {
	io.Reader
	read *atomic.Bool
}

func (b watchedBody) Read(p []byte) (int, error) { b.read.Store(true); return b.Reader.Read(p) }
func (b watchedBody) Close() error               { return nil }

func TestAbuseMiddlewareRefusesBeforeTheBody(t *testing.T) {
	reasons := map[string]int{}
	now := time.Unix(1000, 0)
	a := newTestAuth(t, Options{Denied: func(r string) { reasons[r]++ }, Now: func() time.Time { return now }})
	var reached atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/open" {
			return
		}
		reached.Add(1)
		p, ok := FromContext(r.Context())
		require.True(t, ok, "the principal is in the context")
		require.Equal(t, "token:p", p.Name)
		_, _ = io.Copy(io.Discard, r.Body)
	})
	h := a.Middleware(next, HTTPOptions{RefusalRate: 1, Public: func(p string) bool { return p == "/open" }})
	const proc = "/jq.v1.JobService/SubmitJobs"

	do := func(authz, contentType, path, addr string) (*httptest.ResponseRecorder, bool) {
		var read atomic.Bool
		body := watchedBody{Reader: strings.NewReader(strings.Repeat("\xc6", 4<<20)), read: &read}
		req := httptest.NewRequest(http.MethodPost, path, body)
		req.RemoteAddr = addr
		req.Header.Set("Content-Type", contentType)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w, read.Load()
	}

	// Anonymous and bad-token 4 MiB garbage bodies: UNAUTHENTICATED, body never read.
	w, read := do("", "application/msgpack", proc, "192.0.2.1:1000")
	require.False(t, read)
	require.Equal(t, http.StatusUnauthorized, w.Code)
	var e struct{ Code, Message string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e))
	require.Equal(t, "unauthenticated", e.Code)
	w, read = do("Bearer wrong", "application/grpc", proc, "192.0.2.1:1001")
	require.False(t, read)
	require.Equal(t, "16", w.Header().Get("Grpc-Status"), "a gRPC caller gets a gRPC status")
	require.Equal(t, map[string]int{ReasonMissing: 1, ReasonInvalidToken: 1}, reasons)

	// The source's burst (2) is spent: the next refusal is rate_limited and closes the connection.
	w, _ = do("", "application/json", proc, "192.0.2.1:1002")
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "close", w.Header().Get("Connection"))
	require.Equal(t, 1, reasons[ReasonRateLimited])
	// Another address has its own budget; the limited address's good token still passes.
	w, _ = do("", "application/json", proc, "198.51.100.7:1000")
	require.Equal(t, http.StatusUnauthorized, w.Code)
	w, read = do("Bearer jq_p", "application/json", proc, "192.0.2.1:1003")
	require.True(t, read)
	require.Equal(t, http.StatusOK, w.Code)
	require.EqualValues(t, 1, reached.Load())

	// A second later the budget has refilled.
	now = now.Add(time.Second)
	w, _ = do("", "application/json", proc, "192.0.2.1:1004")
	require.Equal(t, http.StatusUnauthorized, w.Code)

	// A producer may not call an admin RPC: refused before the body too.
	w, read = do("Bearer jq_p", "application/json", "/jq.v1.QueueService/DeleteQueue", "192.0.2.2:1")
	require.False(t, read)
	require.Equal(t, http.StatusForbidden, w.Code)
	require.Equal(t, 1, reasons[ReasonForbidden])

	// Public paths need nothing.
	req := httptest.NewRequest(http.MethodGet, "/open", nil)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code)
}

// BenchmarkMiddlewareRefusal is the CPU one anonymous refusal costs, whatever its body.
func BenchmarkMiddlewareRefusal(b *testing.B) {
	a, err := New(Options{})
	require.NoError(b, err)
	h := a.Middleware(http.NotFoundHandler(), HTTPOptions{})
	body := strings.Repeat("x", 4<<20)
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/jq.v1.JobService/SubmitJobs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}
