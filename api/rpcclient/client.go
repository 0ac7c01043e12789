// Package rpcclient is the transport of the jq API: one connect client per
// service (the generated stubs) over gRPC (HTTP/2: h2c in plaintext, or
// TLS/mTLS, so it also works through any gRPC proxy), with bearer tokens,
// keepalive pings and failover between replicas. The roles, api/workerconn
// and package client build on it; applications use package client, whose
// typed calls wrap these stubs.
package rpcclient

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/internal/rpctrace"
)

// Options select the server and the transport security.
type Options struct {
	// Addr is host:port, or a URL (http://… for plaintext, https://… for TLS), or a comma-separated
	// list of host:port: several server replicas, tried in order when a connection is made and
	// kept while it works, so a client outlives the replica it was talking to.
	Addr string
	// CAFile verifies the server certificate; setting it (or CertFile) turns on TLS.
	CAFile string
	// CertFile and KeyFile are the client certificate for mTLS (FR-048).
	CertFile string
	KeyFile  string
	// Token is sent on every call as "Authorization: Bearer <token>" (a server with
	// authentication on requires a token or a client certificate; docs/security.md).
	Token string
	// Interceptors run on every call (logging, auth, tracing).
	Interceptors []connect.Interceptor
	// TracerProvider, when set, gives every call a client span and sends the
	// caller's trace context (W3C traceparent) in the headers, so a job
	// submitted inside a trace continues it on the server and in the worker.
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context headers (nil: W3C Trace Context).
	Propagator propagation.TextMapPropagator
	// PingAfter is how long an HTTP/2 connection may be silent before the client pings it, and
	// PingTimeout how long it waits for the answer before it closes the connection: a dead or
	// partitioned server is noticed within their sum (default 1 s + 1 s), and the next call dials
	// again — a worker's stream reconnects as soon as the network heals. Negative: no pings.
	PingAfter, PingTimeout time.Duration
}

// dialTimeout bounds one TCP connect.
const dialTimeout = 3 * time.Second

// Default HTTP/2 keepalive of a client.
const (
	DefaultPingAfter   = time.Second
	DefaultPingTimeout = time.Second
)

// Client holds one connect client per service, sharing one HTTP transport.
type Client struct {
	Jobs    jqv1connect.JobServiceClient
	Queues  jqv1connect.QueueServiceClient
	Workers jqv1connect.WorkerServiceClient
	Admin   jqv1connect.AdminServiceClient
	// Schedules manages periodic jobs (docs/schedules.md).
	Schedules jqv1connect.ScheduleServiceClient
	// Constraints manages flow control (docs/flow-control.md).
	Constraints jqv1connect.ConstraintServiceClient

	baseURL string
	http    *http.Client
}

// New builds a client; it does not dial until the first call.
func New(opts Options) (*Client, error) {
	addrs, err := splitAddrs(opts.Addr)
	if err != nil {
		return nil, err
	}
	baseURL, useTLS, err := baseURL(Options{Addr: addrs[0], CAFile: opts.CAFile, CertFile: opts.CertFile})
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		// A dial into a partition gives up soon, so the next attempt after the network heals is not
		// stuck behind TCP's SYN retries.
		DialContext:       (&net.Dialer{Timeout: dialTimeout}).DialContext,
		ForceAttemptHTTP2: true,
		MaxIdleConns:      16,
	}
	var fo *failover
	if len(addrs) > 1 {
		fo = &failover{addrs: addrs}
		tr.Proxy = nil // the list names the servers themselves
		tr.DialContext = fo.dial
	}
	p := new(http.Protocols)
	if useTLS {
		tc, err := clientTLS(opts)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = tc
		if fo != nil {
			fo.tls = tc
			tr.DialTLSContext = fo.dialTLS
		}
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	tr.Protocols = p
	if opts.PingAfter >= 0 {
		tr.HTTP2 = &http.HTTP2Config{
			SendPingTimeout: cmp.Or(opts.PingAfter, DefaultPingAfter),
			PingTimeout:     cmp.Or(max(opts.PingTimeout, 0), DefaultPingTimeout),
		}
	}
	hc := &http.Client{Transport: tr}
	interceptors := opts.Interceptors
	if opts.Token != "" {
		if strings.ContainsAny(opts.Token, " \t\r\n") {
			return nil, errors.New("client: the token contains white space (check the token file)")
		}
		interceptors = append([]connect.Interceptor{bearer("Bearer " + opts.Token)}, interceptors...)
	}
	if opts.TracerProvider != nil {
		ic, err := rpctrace.NewInterceptor(opts.TracerProvider, opts.Propagator)
		if err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
		interceptors = append([]connect.Interceptor{ic}, interceptors...) // outermost
	}
	copts := []connect.ClientOption{
		connect.WithGRPC(),
		connect.WithInterceptors(interceptors...),
		connect.WithCompressMinBytes(16 << 10), // small requests are cheaper sent as they are
	}
	return &Client{
		Jobs:        jqv1connect.NewJobServiceClient(hc, baseURL, copts...),
		Queues:      jqv1connect.NewQueueServiceClient(hc, baseURL, copts...),
		Workers:     jqv1connect.NewWorkerServiceClient(hc, baseURL, copts...),
		Admin:       jqv1connect.NewAdminServiceClient(hc, baseURL, copts...),
		Schedules:   jqv1connect.NewScheduleServiceClient(hc, baseURL, copts...),
		Constraints: jqv1connect.NewConstraintServiceClient(hc, baseURL, copts...),
		baseURL:     baseURL,
		http:        hc,
	}, nil
}

// BaseURL is the URL the client calls.
func (c *Client) BaseURL() string { return c.baseURL }

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

func baseURL(opts Options) (string, bool, error) {
	addr := strings.TrimSpace(opts.Addr)
	if addr == "" {
		return "", false, errors.New("client: server address is empty")
	}
	wantTLS := opts.CAFile != "" || opts.CertFile != ""
	switch {
	case strings.HasPrefix(addr, "https://"):
		return strings.TrimSuffix(addr, "/"), true, nil
	case strings.HasPrefix(addr, "http://"):
		if wantTLS {
			return "", false, fmt.Errorf("client: %s is plaintext but TLS files were given", addr)
		}
		return strings.TrimSuffix(addr, "/"), false, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", false, fmt.Errorf("client: server address %q: want host:port", addr)
	}
	if wantTLS {
		return "https://" + addr, true, nil
	}
	return "http://" + addr, false, nil
}

func clientTLS(opts Options) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("client: tls ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client: tls ca: no PEM certificates in %s", opts.CAFile)
		}
		tc.RootCAs = pool
	}
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		return nil, errors.New("client: --tls-cert and --tls-key go together")
	}
	if opts.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client: tls client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// splitAddrs is the list of a comma-separated Addr; a URL stands alone.
func splitAddrs(addr string) ([]string, error) {
	var out []string
	for a := range strings.SplitSeq(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("client: server address is empty")
	}
	if len(out) > 1 {
		for _, a := range out {
			if _, _, err := net.SplitHostPort(a); err != nil || strings.Contains(a, "://") {
				return nil, fmt.Errorf("client: server address %q in a list: want host:port", a)
			}
		}
	}
	return out, nil
}

// failover dials the first server of its list that answers, starting with the one that answered
// last: while a replica works every new connection goes to it; when it is gone, the next one
// takes over. (The transport keeps one HTTP/2 connection and dials again only when it breaks.)
type failover struct {
	addrs []string
	tls   *tls.Config

	mu   sync.Mutex
	last int
}

func (f *failover) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	conn, _, err := f.dialAny(ctx, network)
	return conn, err
}

func (f *failover) dialAny(ctx context.Context, network string) (net.Conn, string, error) {
	f.mu.Lock()
	start := f.last
	f.mu.Unlock()
	var errs []error
	for i := range f.addrs {
		n := (start + i) % len(f.addrs)
		conn, err := (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, network, f.addrs[n])
		if err == nil {
			f.mu.Lock()
			f.last = n
			f.mu.Unlock()
			return conn, f.addrs[n], nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "", errors.Join(errs...)
}

// dialTLS is dial plus the TLS handshake, verifying the certificate against the host actually
// dialled (replicas may have names of their own).
func (f *failover) dialTLS(ctx context.Context, network, _ string) (net.Conn, error) {
	conn, addr, err := f.dialAny(ctx, network)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	cfg := f.tls.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	cfg.NextProtos = []string{"h2"}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return tc, nil
}

// ReadTokenFile reads a token from a file (a mounted secret), without surrounding white space.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

// bearer adds the Authorization header to every call.
type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			req.Header().Set("Authorization", string(b))
		}
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", string(b))
		return conn
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
