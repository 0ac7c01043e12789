package handlers_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/handlers"
)

// receiver is a test endpoint: it counts requests and answers with fn.
type receiver struct {
	*httptest.Server
	hits atomic.Int64
}

func newReceiver(t *testing.T, fn http.HandlerFunc) *receiver {
	t.Helper()
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		fn(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

// httpHandler allows the given prefixes, over a transport of the test's own
// (closed at the end, for goleak).
func httpHandler(t *testing.T, opts handlers.HTTPOptions, allow ...string) queue.Handler {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	opts.Allow, opts.Transport = allow, tr
	return handlers.HTTPWith(opts)
}

func httpJob(t *testing.T, p map[string]any) *queue.Job {
	t.Helper()
	b, err := json.Marshal(p)
	require.NoError(t, err)
	j := job(handlers.TypeHTTP, string(b))
	j.Queue, j.Attempt = "hooks", 3
	return j
}

// verify is the receiver's check of docs/handlers.md: recompute the HMAC of
// "<t>.<raw body>", compare in constant time, refuse an old t.
func verify(secret string, r *http.Request, body []byte, now time.Time) bool {
	var ts, sig string
	for part := range strings.SplitSeq(r.Header.Get("X-Jq-Signature"), ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(t, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(body)))
	want := hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(want), []byte(sig))
}

func TestHTTPSuccessJSONSigned(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	var got struct {
		env       map[string]any
		verified  bool
		forged    bool
		header    http.Header
		ctype     string
		userAgent string
	}
	srv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got.verified = verify(secret, r, body, time.Now())
		got.forged = verify("other", r, body, time.Now()) || verify(secret, r, append(body, ' '), time.Now())
		got.header, got.ctype = r.Header.Clone(), r.Header.Get("Content-Type")
		_ = json.Unmarshal(body, &got.env)
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	h := httpHandler(t, handlers.HTTPOptions{SigningSecret: secret}, srv.URL+"/hooks")
	out, err := h.Handle(t.Context(), httpJob(t, map[string]any{
		"url": srv.URL + "/hooks/order", "body": map[string]any{"n": 1, "s": "x"}, "headers": map[string]string{"X-Tenant": "acme"},
	}))
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, string(out))
	require.True(t, got.verified, "the documented recipe verifies the signature")
	require.False(t, got.forged, "another secret or another body does not")
	require.Equal(t, "application/json", got.ctype)
	require.Equal(t, "acme", got.header.Get("X-Tenant"))
	require.Equal(t, "00000000-0000-4000-8000-000000000001", got.header.Get("X-Jq-Job-Id"))
	require.Equal(t, "3", got.header.Get("X-Jq-Attempt"))
	require.Equal(t, map[string]any{
		"id": "00000000-0000-4000-8000-000000000001", "attempt": float64(3), "type": "http", "queue": "hooks",
		"payload": map[string]any{"n": float64(1), "s": "x"},
	}, got.env)

	// The executor's job info wins over the job's fields.
	ctx := queue.WithJobInfo(t.Context(), queue.JobInfo{ID: "other-id", Attempt: 7, Queue: "q2", Type: "http"})
	_, err = h.Handle(ctx, httpJob(t, map[string]any{"url": srv.URL + "/hooks"}))
	require.NoError(t, err)
	require.Equal(t, "7", got.header.Get("X-Jq-Attempt"))
	require.Nil(t, got.env["payload"], "no body: payload null")
}

func TestHTTPMsgpack(t *testing.T) {
	t.Parallel()
	var env map[string]any
	var ctype string
	srv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		ctype = r.Header.Get("Content-Type")
		body, _ := io.ReadAll(r.Body)
		if err := msgpack.Unmarshal(body, &env); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})
	h := httpHandler(t, handlers.HTTPOptions{}, srv.URL)
	_, err := h.Handle(t.Context(), httpJob(t, map[string]any{
		"url": srv.URL + "/", "content_type": "application/msgpack",
		"body": map[string]any{"n": 42, "f": 1.5, "list": []any{"a", true, nil}},
	}))
	require.NoError(t, err)
	require.Equal(t, "application/msgpack", ctype)
	require.Equal(t, "hooks", env["queue"])
	require.EqualValues(t, 3, env["attempt"])
	p := env["payload"].(map[string]any)
	require.EqualValues(t, 42, p["n"])
	require.InDelta(t, 1.5, p["f"], 0)
	require.Equal(t, []any{"a", true, nil}, p["list"])
}

func TestHTTPStatuses(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]struct {
		permanent bool
		line      string
	}{
		http.StatusBadRequest:          {true, "400 Bad Request: field x is required"},
		http.StatusNotFound:            {true, "404 Not Found: field x is required"},
		http.StatusRequestTimeout:      {false, "408 Request Timeout"},
		http.StatusTooManyRequests:     {false, "429 Too Many Requests"},
		http.StatusInternalServerError: {false, "500 Internal Server Error"},
		http.StatusBadGateway:          {false, "502 Bad Gateway"},
		http.StatusNotModified:         {true, "304 Not Modified"},
	} {
		srv := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(code)
			_, _ = io.WriteString(w, "field x is required\nsecond line "+strings.Repeat("y", 10000))
		})
		h := httpHandler(t, handlers.HTTPOptions{}, srv.URL)
		_, err := h.Handle(t.Context(), httpJob(t, map[string]any{"url": srv.URL + "/x?token=abc"}))
		require.Error(t, err, code)
		require.Equal(t, want.permanent, queue.IsPermanent(err), code)
		require.Contains(t, err.Error(), want.line, code)
		require.NotContains(t, err.Error(), "second line", code)
		require.NotContains(t, err.Error(), "token=abc", "the query is not in the message")
		require.Zero(t, queue.RetryAfterOf(err), "no Retry-After header")
	}
}

func TestHTTPRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC)
	for name, tc := range map[string]struct {
		code   int
		header string
		want   time.Duration
	}{
		"seconds, 429":   {http.StatusTooManyRequests, "120", 2 * time.Minute},
		"seconds, 503":   {http.StatusServiceUnavailable, "7", 7 * time.Second},
		"HTTP date":      {http.StatusServiceUnavailable, now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		"date passed":    {http.StatusTooManyRequests, now.Add(-time.Hour).Format(http.TimeFormat), 0},
		"garbage":        {http.StatusTooManyRequests, "soon", 0},
		"ignored on 500": {http.StatusInternalServerError, "120", 0},
	} {
		srv := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", tc.header)
			w.WriteHeader(tc.code)
		})
		h := httpHandler(t, handlers.HTTPOptions{Now: func() time.Time { return now }}, srv.URL)
		_, err := h.Handle(t.Context(), httpJob(t, map[string]any{"url": srv.URL}))
		require.Error(t, err, name)
		require.False(t, queue.IsPermanent(err), name)
		require.Equal(t, tc.want, queue.RetryAfterOf(err), name)
	}
}

func TestHTTPTimeoutRetryable(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client leaving
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	h := httpHandler(t, handlers.HTTPOptions{}, srv.URL)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := h.Handle(ctx, httpJob(t, map[string]any{"url": srv.URL}))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, queue.IsPermanent(err))

	close(release)
	srv.Close() // a transport error: connection refused
	_, err = h.Handle(t.Context(), httpJob(t, map[string]any{"url": srv.URL}))
	require.Error(t, err)
	require.False(t, queue.IsPermanent(err))
}

func TestHTTPResponseTooLarge(t *testing.T) {
	t.Parallel()
	srv := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("z", 101))
	})
	_, err := httpHandler(t, handlers.HTTPOptions{MaxResponseBytes: 100}, srv.URL).Handle(t.Context(), httpJob(t, map[string]any{"url": srv.URL}))
	require.ErrorIs(t, err, queue.ErrOutputTooLarge)
	require.True(t, queue.IsPermanent(err))
	out, err := httpHandler(t, handlers.HTTPOptions{MaxResponseBytes: 101}, srv.URL).Handle(t.Context(), httpJob(t, map[string]any{"url": srv.URL}))
	require.NoError(t, err)
	require.Len(t, out, 101)
}

func TestHTTPAllowList(t *testing.T) {
	t.Parallel()
	srv := newReceiver(t, func(http.ResponseWriter, *http.Request) {})
	h := httpHandler(t, handlers.HTTPOptions{}, srv.URL+"/hooks", "https://a.example.com")
	for _, u := range []string{
		"https://a.example.com.evil.com/", // host prefix trick
		"https://a.example.com@evil.com/", // user information
		"http://a.example.com/",           // another scheme
		"https://a.example.com:8443/",     // another port
		srv.URL + "/hooksX",               // not at a path boundary
		srv.URL + "/hook",                 // shorter
		srv.URL + "/hooks/../admin",       // dot segments
		srv.URL + "/hooks/%2e%2e/admin",   // encoded dot segments
		srv.URL + "/hooks%2F..%2Fadmin",   // behind encoded slashes
		"ftp://a.example.com/",            // not http
		"/relative",                       // not absolute
		strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/hooks", // another host name
	} {
		_, err := h.Handle(t.Context(), httpJob(t, map[string]any{"url": u}))
		require.Error(t, err, u)
		require.True(t, queue.IsPermanent(err), u)
		require.NotContains(t, err.Error(), "\n")
	}
	require.Zero(t, srv.hits.Load(), "no request reached the server")

	for _, u := range []string{srv.URL + "/hooks", srv.URL + "/hooks/a/b?x=1", srv.URL + "/hooks/x/../y#frag"} {
		_, err := h.Handle(t.Context(), httpJob(t, map[string]any{"url": u}))
		require.NoError(t, err, u)
	}
	require.EqualValues(t, 3, srv.hits.Load())

	_, err := handlers.HTTPWith(handlers.HTTPOptions{}).Handle(t.Context(), httpJob(t, map[string]any{"url": srv.URL}))
	require.EqualError(t, err, "http: worker.http.allow is empty")
	require.True(t, queue.IsPermanent(err))
}

func TestHTTPRedirects(t *testing.T) {
	t.Parallel()
	outside := newReceiver(t, func(http.ResponseWriter, *http.Request) {})
	srv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hooks/away":
			http.Redirect(w, r, outside.URL+"/hooks/x", http.StatusTemporaryRedirect)
		case "/hooks/out-of-prefix":
			http.Redirect(w, r, "/admin", http.StatusTemporaryRedirect)
		case "/hooks/moved":
			http.Redirect(w, r, "/hooks/new", http.StatusPermanentRedirect)
		case "/hooks/new":
			b, _ := io.ReadAll(r.Body)
			_, _ = w.Write(b[:min(len(b), 2)])
		default:
			t.Errorf("unexpected request to %s", r.URL)
		}
	})
	h := httpHandler(t, handlers.HTTPOptions{}, srv.URL+"/hooks")
	for _, path := range []string{"/hooks/away", "/hooks/out-of-prefix"} {
		_, err := h.Handle(t.Context(), httpJob(t, map[string]any{"url": srv.URL + path}))
		require.ErrorContains(t, err, "not in worker.http.allow", path)
		require.True(t, queue.IsPermanent(err), path)
	}
	require.Zero(t, outside.hits.Load())
	out, err := h.Handle(t.Context(), httpJob(t, map[string]any{"url": srv.URL + "/hooks/moved"}))
	require.NoError(t, err, "a redirect within the allow-list is followed, with the body")
	require.Equal(t, `{"`, string(out))
}

func TestHTTPBadPayload(t *testing.T) {
	t.Parallel()
	h := httpHandler(t, handlers.HTTPOptions{}, "https://a.example.com")
	for payload, want := range map[string]string{
		`{}`: `"url" is required`,
		`{"url": "https://a.example.com", "content_type": "text/xml"}`:        "content_type must be",
		`{"url": "https://a.example.com", "headers": {"Content-Type": "x"}}`:  "Content-Type is set by the handler",
		`{"url": "https://a.example.com", "headers": {"x-jq-attempt": "9"}}`:  "X-Jq-Attempt is set by the handler",
		`{"url": "https://a.example.com", "headers": {"bad name": "x"}}`:      "bad header name",
		`{"url": "https://a.example.com", "headers": {"X-A": "a\r\nX-B: b"}}`: "contains CR, LF or NUL",
		`{"url": "https://a.example.com", "method": "GET"}`:                   `unknown field "method"`,
		`{"url": "https://a.example.com", "body": {"a": 1}} trailing`:         "trailing data",
	} {
		_, err := h.Handle(t.Context(), job(handlers.TypeHTTP, payload))
		require.ErrorContains(t, err, want, payload)
		require.True(t, queue.IsPermanent(err), payload)
	}
}

func TestURLPrefix(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"a.example.com", "https://", "https://u:p@a.example.com", "https://a.example.com/?q=1", "https://a.example.com/#f", "mailto:x@y"} {
		_, err := handlers.ParseURLPrefix(bad)
		require.Error(t, err, bad)
	}
	p, err := handlers.ParseURLPrefix("HTTPS://A.Example.COM.:443/hooks/../v1")
	require.NoError(t, err)
	require.Equal(t, handlers.URLPrefix{Scheme: "https", Host: "a.example.com", Path: "/v1"}, p)
}
