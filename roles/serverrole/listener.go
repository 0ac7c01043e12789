package serverrole

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/config"
)

// newAPIServer is the API's http.Server with its connection bounds (grpc.*_timeout_s):
//
//   - ReadHeaderTimeout: a connection must complete its TLS handshake, HTTP/2 client preface or
//     HTTP/1.1 request headers in time, or it is closed.
//   - IdleTimeout: an HTTP/1.1 connection between requests, or an HTTP/2 connection without an
//     open stream, is closed (HTTP/2: GOAWAY, then close). The HTTP/2 server arms this timer only
//     while no stream is open, so a worker's StreamJobs keeps its connection.
//   - The request body must arrive within ReadBodyTimeout (withBodyTimeout).
//   - HTTP/2 pings: a connection silent for serverPingAfter is pinged, and closed when the ping is
//     not answered within serverPingTimeout, so the stream of a worker whose host or network died
//     ends (and its session with it) instead of waiting for TCP's retransmission timeout.
//
// http.Server.ReadTimeout is not used for the body bound. It would work (on HTTP/2 it is per stream,
// and neither protocol applies it once a body has ended, so streams survive it), but a client cut
// off by it gets DEADLINE_EXCEEDED, which reads as its own deadline; withBodyTimeout answers
// RESOURCE_EXHAUSTED and names the setting. WriteTimeout stays unset: it would end every stream.
func newAPIServer(cfg config.GRPC, h http.Handler, tlsCfg *tls.Config, log *zap.Logger) *http.Server {
	return &http.Server{
		Handler:           withBodyTimeout(h, cfg.ReadBodyTimeout()),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout(),
		IdleTimeout:       cfg.IdleTimeout(),
		Protocols:         apiProtocols(tlsCfg != nil),
		TLSConfig:         tlsCfg,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
		HTTP2:             &http.HTTP2Config{SendPingTimeout: serverPingAfter, PingTimeout: serverPingTimeout},
	}
}

// The server's HTTP/2 keepalive (workers ping faster: api/rpcclient).
const (
	serverPingAfter   = 10 * time.Second
	serverPingTimeout = 5 * time.Second
)

// withBodyTimeout gives each request's body d to arrive, counted from when the handler starts
// (just after the headers). Past it, reading the body fails with RESOURCE_EXHAUSTED, which Connect
// returns to the client as the call's error. The deadline is lifted once the body has been read to
// its end, so a server stream (a worker's StreamJobs) runs as long as it likes after its request.
// On HTTP/2 the deadline is the stream's own; on HTTP/1.1 it is the connection's, which serves one
// request at a time.
func withBodyTimeout(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No body (GET, or Content-Length: 0): nothing to wait for, and on HTTP/1.1 the server is
		// already reading the connection in the background, where a deadline would cancel the call.
		if d > 0 && r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			rc := http.NewResponseController(w)
			if err := rc.SetReadDeadline(time.Now().Add(d)); err == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, timeout: d}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline at the body's end and turns a deadline error into one a
// client can read.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	once    sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		b.once.Do(func() { _ = b.rc.SetReadDeadline(time.Time{}) })
	case errors.Is(err, os.ErrDeadlineExceeded):
		return n, connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("request body not received within %s (grpc.read_body_timeout_s)", b.timeout))
	}
	return n, err
}
